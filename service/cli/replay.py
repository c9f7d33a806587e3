"""``pr-review-agent replay``: a payload file delivered to a running server as GitHub would.

The payload is signed with the config's current webhook secret (the one GitHub signs with
once a rotation is done) and POSTed with GitHub's headers and a fresh
``X-GitHub-Delivery``; the answer is printed.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Final, TextIO

import httpx

from service import __version__
from service.config.schema import Config
from service.github.webhooks import sign

__all__ = ["replay", "replay_url"]

#: How long ``replay`` waits for the server's answer.
REPLAY_TIMEOUT: Final = 30.0
#: GitHub sends ``GitHub-Hookshot/<id>``; this says which tool it really was.
REPLAY_USER_AGENT: Final = f"GitHub-Hookshot/pr-review-agent-replay-{__version__}"


def replay_url(config: Config) -> str:
    """Where ``replay`` posts by default: this host's server, at the webhook path."""
    return f"http://127.0.0.1:{config.server.port}{config.server.webhook_path}"


def replay(config: Config, event: str, payload: Path, *, url: str | None, out: TextIO,
           err: TextIO, transport: httpx.BaseTransport | None = None) -> int:
    """``pr-review-agent replay``: POST ``payload``'s bytes, signed, with GitHub's headers;
    print the status and the body. 0 for a 2xx answer, 1 otherwise, 2 for bad input."""
    if not event.strip() or any(c.isspace() for c in event):
        print(f"replay: --event must be an event name such as pull_request, got {event!r}",
              file=err)
        return 2
    try:
        body = payload.read_bytes()
    except OSError as exc:
        print(f"replay: cannot read {payload}: {exc.strerror or type(exc).__name__}", file=err)
        return 2
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        print(f"replay: {payload} is not JSON: {exc}", file=err)
        return 2
    if not isinstance(parsed, dict):
        print(f"replay: {payload} must hold a JSON object, as every GitHub payload is",
              file=err)
        return 2
    target = url or replay_url(config)
    delivery = str(uuid.uuid4())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": REPLAY_USER_AGENT,
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-GitHub-Hook-Installation-Target-ID": str(config.github.app_id),
        # The current secret: the one GitHub signs with once a rotation is done.
        "X-Hub-Signature-256": sign(body, config.github.webhook_secrets[0]),
    }
    try:
        with httpx.Client(timeout=REPLAY_TIMEOUT, transport=transport) as client:
            response = client.post(target, content=body, headers=headers)
    except httpx.HTTPError as exc:
        print(f"replay: POST {target} failed: {exc or type(exc).__name__}", file=err)
        return 1
    print(f"POST {target} (X-GitHub-Event: {event}, X-GitHub-Delivery: {delivery})",
          file=out)
    print(f"HTTP {response.status_code} {response.reason_phrase}", file=out)
    if response.content:
        print(response.text, file=out)
    return 0 if response.is_success else 1
