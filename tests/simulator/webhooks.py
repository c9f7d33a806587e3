"""Delivering webhooks the way GitHub does: signed, with GitHub's headers.

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=service_app),
                                 base_url="http://service") as http:
        sender = WebhookSender(http, url="/github/webhook", secret=secret, app_id=app.id)
        response = await sender.send("pull_request", world.payloads.pull_request("opened", pr))
        await sender.deliver_pending(world)  # every event the world emitted, in order

Headers: ``X-GitHub-Event``, ``X-GitHub-Delivery`` (a UUID; a redelivery reuses it),
``X-GitHub-Hook-ID``, ``X-GitHub-Hook-Installation-Target-ID`` (the App id),
``X-GitHub-Hook-Installation-Target-Type: integration``, ``User-Agent: GitHub-Hookshot/…``,
``Content-Type`` and, only when a secret is configured, ``X-Hub-Signature-256`` (HMAC-SHA256
of the exact body bytes) and the legacy ``X-Hub-Signature`` (HMAC-SHA1). With
``content_type="form"`` the body is ``payload=<url-encoded JSON>`` and the signature covers
that form body, as GitHub's does.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlencode

import httpx

from .events import EmittedEvent
from .hook_log import NO_CONNECTION, OK, TIMED_OUT

if TYPE_CHECKING:
    from .hook_log import HookLog
    from .state import World

ContentType = Literal["json", "form"]
HOOKSHOT_AGENT = "GitHub-Hookshot/8f3c2a1"


def sign(secret: str | bytes, body: bytes) -> tuple[str, str]:
    """(``X-Hub-Signature-256``, ``X-Hub-Signature``) values for ``body``."""
    key = secret.encode() if isinstance(secret, str) else secret
    sha256 = hmac.new(key, body, hashlib.sha256).hexdigest()
    sha1 = hmac.new(key, body, hashlib.sha1).hexdigest()
    return f"sha256={sha256}", f"sha1={sha1}"


def encode_body(payload: dict[str, Any], content_type: ContentType) -> tuple[bytes, str]:
    """The body bytes and ``Content-Type`` GitHub would send for ``payload``."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
    if content_type == "form":
        return urlencode({"payload": text}).encode(), "application/x-www-form-urlencoded"
    return text.encode(), "application/json"


@dataclass
class Delivery:
    """One delivery attempt as sent (the secret is not kept; the signature is)."""

    event: str
    delivery_id: str
    headers: dict[str, str]
    body: bytes
    status: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    redelivery: bool = False


class WebhookSender:
    """Signs and POSTs webhook deliveries through the ``httpx.AsyncClient`` it is given."""

    def __init__(self, client: httpx.AsyncClient, *, url: str, secret: str | bytes | None,
                 app_id: int, hook_id: int = 479_163_224,
                 content_type: ContentType = "json", log: HookLog | None = None) -> None:
        if content_type not in ("json", "form"):
            raise ValueError(f"content_type must be 'json' or 'form', not {content_type!r}")
        self._client = client
        self._secret = secret
        self.url = url
        self.app_id = app_id
        self.hook_id = hook_id
        self.content_type: ContentType = content_type
        self.deliveries: list[Delivery] = []
        #: GitHub's delivery log, when the test reads it: every attempt is recorded there.
        self.log = log

    def build(self, event: str, payload: dict[str, Any], *, delivery_id: str | None = None,
              content_type: ContentType | None = None, redelivery: bool = False) -> Delivery:
        """The delivery GitHub would send, without sending it."""
        body, mime = encode_body(payload, content_type or self.content_type)
        headers = {
            "Accept": "*/*",
            "Content-Type": mime,
            "User-Agent": HOOKSHOT_AGENT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
            "X-GitHub-Hook-ID": str(self.hook_id),
            "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
        }
        if self._secret is not None:
            sha256, sha1 = sign(self._secret, body)
            headers["X-Hub-Signature-256"] = sha256
            headers["X-Hub-Signature"] = sha1
        return Delivery(event=event, delivery_id=headers["X-GitHub-Delivery"], headers=headers,
                        body=body, payload=payload, redelivery=redelivery)

    async def post(self, delivery: Delivery, *, timed_out: bool = False) -> httpx.Response:
        """Send a built delivery (again, for a redelivery: same ``X-GitHub-Delivery``).
        ``timed_out``: the App got it, but GitHub logs the attempt as timed out (the
        answer came after its 10 seconds)."""
        response = await self._client.post(self.url, content=delivery.body,
                                           headers=delivery.headers)
        self.deliveries.append(Delivery(event=delivery.event, delivery_id=delivery.delivery_id,
                                        headers=dict(delivery.headers), body=delivery.body,
                                        status=response.status_code, payload=delivery.payload,
                                        redelivery=delivery.redelivery))
        if timed_out:
            self._record(delivery, TIMED_OUT, 0)
        elif response.is_success:
            self._record(delivery, OK, response.status_code)
        else:
            self._record(delivery, f"Invalid HTTP Response: {response.status_code}",
                         response.status_code)
        return response

    def lose(self, delivery: Delivery) -> None:
        """An attempt that never reached the App (it was down): logged, not sent."""
        self._record(delivery, NO_CONNECTION, 0)

    def _record(self, delivery: Delivery, status: str, code: int) -> None:
        if self.log is not None:
            self.log.record(guid=delivery.delivery_id, event=delivery.event,
                            headers=delivery.headers, payload=delivery.payload,
                            status=status, status_code=code,
                            redelivery=delivery.redelivery)

    async def send(self, event: str, payload: dict[str, Any], *,
                   delivery_id: str | None = None,
                   content_type: ContentType | None = None) -> httpx.Response:
        return await self.post(self.build(event, payload, delivery_id=delivery_id,
                                          content_type=content_type))

    def build_emitted(self, emitted: EmittedEvent) -> Delivery:
        return self.build(emitted.event, emitted.payload, delivery_id=emitted.delivery_id,
                          redelivery=emitted.redelivery)

    async def send_emitted(self, emitted: EmittedEvent) -> httpx.Response:
        return await self.post(self.build_emitted(emitted))

    async def ping(self, world: World) -> httpx.Response:
        payload = world.payloads.ping(hook_id=self.hook_id, url=self.url, app_id=self.app_id)
        return await self.send("ping", payload)

    async def deliver_pending(self, world: World) -> list[httpx.Response]:
        """Deliver (and remove) every event the world has emitted so far, oldest first."""
        responses = []
        while world.events:
            responses.append(await self.send_emitted(world.events.pop(0)))
        return responses
