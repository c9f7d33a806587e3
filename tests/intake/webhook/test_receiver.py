"""The webhook route (``service.intake.webhook.receiver`` as a FastAPI route of ``create_app``).

The contract itself is pinned in ``tests/intake/webhook/test_end_to_end.py``; these pin what
serving the route must not change: other methods, a mount under a root path, the answer's
headers, a bug inside the receiver, and repeated headers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from service.github.webhooks import sign
from service.intake.webhook import receiver
from tests.kit.stores import BACKENDS
from tests.simulator.harness import REPO
from tests.webhook_env import SECRET, Env, open_env, opened


@pytest.fixture(params=BACKENDS)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with open_env(tmp_path, backend=request.param) as opened_env:
        yield opened_env


def signed(env: Env, delivery_id: str = "d-1") -> tuple[bytes, dict[str, str]]:
    body = json.dumps(opened(env)).encode()
    return body, {"Content-Type": "application/json", "X-GitHub-Event": "pull_request",
                  "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": sign(body, SECRET)}


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
async def test_other_methods_on_the_webhook_path_are_405(env: Env, method: str) -> None:
    response = await env.client.request(method, env.config.server.webhook_path)

    assert response.status_code == 405
    assert env.rows("deliveries") == []


@pytest.mark.anyio
async def test_the_answer_is_json_with_its_length(env: Env) -> None:
    body, headers = signed(env)

    response = await env.client.post(env.config.server.webhook_path, content=body,
                                     headers=headers)

    assert response.status_code == 202
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    assert response.json()["enqueued"] == [
        f"pr_opened:{REPO}:1:{env.world.pull(REPO, 1).head.head_sha}"]


@pytest.mark.anyio
async def test_the_route_is_found_under_a_root_path(env: Env) -> None:
    body, headers = signed(env)
    app = env.client._transport.app  # type: ignore[attr-defined]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, root_path="/agent"),
                                 base_url="http://service") as client:
        response = await client.post("/agent" + env.config.server.webhook_path,
                                     content=body, headers=headers)

    assert response.status_code == 202
    assert len(env.rows("queue")) == 1


@pytest.mark.anyio
async def test_a_bug_in_the_receiver_is_a_logged_500_not_a_dropped_request(
        env: Env, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(receiver, "check_signature", broken)
    body, headers = signed(env)

    with caplog.at_level(logging.ERROR):
        response = await env.client.post(env.config.server.webhook_path, content=body,
                                         headers=headers)

    assert response.status_code == 500
    assert response.json() == {"error": "internal error"}
    assert env.rows("deliveries") == []
    assert any(r.message == "webhook receiver failed" and r.exc_info for r in caplog.records)


@pytest.mark.anyio
async def test_a_repeated_header_counts_once_first_value_first(env: Env) -> None:
    body, headers = signed(env)
    raw = [(k, v) for k, v in headers.items() if k != "X-GitHub-Delivery"]
    raw += [("X-GitHub-Delivery", "first"), ("X-GitHub-Delivery", "second")]

    response = await env.client.post(env.config.server.webhook_path, content=body,
                                     headers=raw)

    assert response.status_code == 202
    assert response.json()["delivery"] == "first"
    assert env.delivery("first") is not None and env.delivery("second") is None
