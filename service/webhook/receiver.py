"""The webhook route: a plain ASGI handler, served ahead of the web app's middleware, and
the steps ``service.webhook.fast_path`` calls from uvicorn's HTTP parser.

A delivery is checked in this order, each answered as DESIGN.md says:

1. size: a declared ``Content-Length`` over ``server.max_body_bytes`` is refused before a
   byte is read, and a body without one stops being read once it passes the limit (413),
   so an oversized request is never buffered;
2. signature: ``X-Hub-Signature-256`` over the raw bytes, constant-time, against every
   configured secret (401), before anything is parsed;
3. ``X-GitHub-Event`` and ``X-GitHub-Delivery`` present (400), and the body JSON or a form
   carrying ``payload=`` (400);
4. one store transaction: a delivery id already recorded changes nothing (200
   ``{"duplicate": true}``); otherwise the delivery row and its effect commit together -- a
   ``ping`` (200), an installation change to ``repositories`` (202), or the trigger rules'
   decision applied to the queue (202). A store failure is the one 5xx: 503.

The rest -- parsing, the rules, the store, the log line -- goes through group commit
(``service.webhook.group_commit``): on the event loop, a batch of deliveries to a transaction,
and a worker thread only to wait for the write lock or for a slow disk's sync. A delivery
is answered only after the transaction holding it committed.

Why plain ASGI: this is the one route that takes load, and the framework's per-request
machinery (middleware layers, a ``Request`` object, routing, ``JSONResponse``) cost more
CPU here than reading, verifying and answering the request does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Final

import anyio
import orjson
from starlette.types import Receive, Scope, Send

from service.config import Config
from service.github.webhooks import SignatureError, check_signature
from service.metrics.instruments import Metrics
from service.storage import is_contention, is_unavailable
from service.webhook.deliveries import (
    STORE_ERRORS,
    DeliveryLog,
    InstallationChange,
    Received,
    Result,
)
from service.webhook.group_commit import GroupCommit

__all__ = ["OFF_LOOP_BYTES", "RETRY_AFTER", "Answer", "WebhookReceiver", "headers_of"]

log = logging.getLogger(__name__)

#: Bodies above this have their signature checked on a worker thread, not the event loop.
OFF_LOOP_BYTES: Final = 256 * 1024
MAX_EVENT_CHARS: Final = 100
MAX_DELIVERY_CHARS: Final = 200
RETRY_AFTER: Final = "5"

_CONTENT_LENGTH: Final = b"content-length"
_CONTENT_TYPE: Final = b"content-type"
_SIGNATURE: Final = b"x-hub-signature-256"
_EVENT: Final = b"x-github-event"
_DELIVERY: Final = b"x-github-delivery"
_WANTED: Final = frozenset({_CONTENT_LENGTH, _CONTENT_TYPE, _SIGNATURE, _EVENT, _DELIVERY})

Headers = tuple[tuple[bytes, bytes], ...]
Answer = tuple[int, dict[str, object], Headers]


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


def headers_of(raw: Iterable[tuple[bytes, bytes]]) -> dict[bytes, str]:
    """The headers the receiver reads, the first of each name, decoded as latin-1."""
    found: dict[bytes, str] = {}
    for raw_name, value in raw:
        name = raw_name.lower()  # ASGI servers send them lower-cased; then this is cheap
        if name in _WANTED and name not in found:
            found[name] = value.decode("latin-1")
    return found


def _github_header(headers: dict[bytes, str], name: bytes, limit: int) -> str | None:
    value = headers.get(name, "").strip()
    return value if value and len(value) <= limit and value.isprintable() else None


async def _read_body(receive: Receive, declared: str | None, limit: int) -> bytes:
    """The body, refused (``_TooLarge``) as soon as it is known to exceed ``limit``."""
    declared = (declared or "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise _TooLarge
            chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _error(status: int, message: str, *headers: tuple[bytes, bytes]) -> Answer:
    return status, {"error": message}, headers


class WebhookReceiver:
    """The webhook route: the checks in the module docstring's order.

    Two ways in, the same steps and answers: ``__call__``, the route as an ASGI app, and
    ``service.webhook.fast_path``, uvicorn's HTTP protocol answering a plain delivery from
    its parser callbacks without the ASGI machinery. Both read the body, then ``check``
    it, ``submit`` what passed, ``settle`` or ``fail`` it when the commit is done, and
    ``answer``.
    """

    def __init__(self, config: Config, deliveries: DeliveryLog, clock: Callable[[], datetime],
                 on_installation_change: Callable[[InstallationChange], None] | None,
                 on_enqueued: Callable[[], None] | None = None, *,
                 metrics: Metrics | None = None) -> None:
        self.limit: Final = config.server.max_body_bytes
        self._metrics = metrics
        self._secrets = config.github.webhook_secrets
        self._writer: GroupCommit[Received, Result] = GroupCommit(
            deliveries.stage, deliveries.receive_batch,
            unavailable=lambda exc: is_unavailable(exc) or is_contention(exc))
        self._clock = clock
        self._on_change = on_installation_change
        self._on_enqueued = on_enqueued

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        try:
            answer = await self._answer(headers_of(scope["headers"]), receive)
        except Exception:
            answer = self.bug()
        status, body, headers = self.answer(answer, started)
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-length", str(len(body)).encode("ascii")),
            (b"content-type", b"application/json"), *headers]})
        await send({"type": "http.response.body", "body": body})

    async def _answer(self, headers: dict[bytes, str], receive: Receive) -> Answer | Result:
        try:
            body = await _read_body(receive, headers.get(_CONTENT_LENGTH), self.limit)
        except _TooLarge:
            log.warning("webhook refused: body over the limit",
                        extra={"limit_bytes": self.limit})
            return _error(413, f"body exceeds {self.limit} bytes", (b"connection", b"close"))
        except _Disconnected:
            return _error(400, "the client disconnected before the body was complete")
        if len(body) > OFF_LOOP_BYTES:
            checked = await anyio.to_thread.run_sync(self.check, headers, body)
        else:
            checked = self.check(headers, body)
        if not isinstance(checked, Received):
            return checked
        try:
            result = await self.submit(checked)
        except Exception as exc:
            return self.fail(checked, exc)
        return self.settle(result)

    def check(self, headers: dict[bytes, str], body: bytes) -> Answer | Received:
        """The signature over ``body``, then the GitHub headers: the delivery to record, or
        the answer refusing it. Runs on the event loop unless the body is over
        ``OFF_LOOP_BYTES``."""
        try:
            check_signature(body, headers.get(_SIGNATURE), self._secrets)
        except SignatureError as exc:
            log.warning("webhook refused: bad signature", extra={"reason": exc.reason})
            return _error(401, f"signature check failed: {exc.reason}")
        event = _github_header(headers, _EVENT, MAX_EVENT_CHARS)
        delivery_id = _github_header(headers, _DELIVERY, MAX_DELIVERY_CHARS)
        if event is None or delivery_id is None:
            missing = "X-GitHub-Event" if event is None else "X-GitHub-Delivery"
            return _error(400, f"missing or invalid {missing} header")
        return Received(delivery_id, event, body, headers.get(_CONTENT_TYPE), self._clock())

    def submit(self, received: Received) -> asyncio.Future[Result]:
        """Hand ``received`` to group commit: a future resolved once it is committed."""
        return self._writer.enqueue(received)

    def fail(self, received: Received, exc: BaseException) -> Answer:
        """The answer to a delivery whose transaction failed: nothing was recorded."""
        # The transaction rolled back, so nothing was recorded and a redelivery will be
        # processed in full: 503 is the honest answer whatever failed.
        store_fault = isinstance(exc, STORE_ERRORS)
        log.error("webhook not recorded: " + ("store failure" if store_fault
                                              else "unexpected error"),
                  exc_info=exc if not store_fault else None, extra={
                      "delivery_id": received.delivery_id, "event": received.event,
                      "error": type(exc).__name__})
        return _error(503, "the store is unavailable; nothing was recorded",
                      (b"retry-after", RETRY_AFTER.encode("ascii")))

    def settle(self, result: Result) -> Result:
        """After the commit: tell the poller of an installation change, wake the workers."""
        if result.change is not None and self._on_change is not None:
            try:
                self._on_change(result.change)
            except Exception:
                log.exception("installation-change callback failed",
                              extra={"delivery_id": result.delivery_id})
        if result.enqueued and self._on_enqueued is not None:
            self._on_enqueued()  # idle workers claim at once instead of at their next poll
        return result

    @staticmethod
    def bug() -> Answer:
        """The answer when a step raised: a bug, not a store outage (those are 503)."""
        log.exception("webhook receiver failed")
        return _error(500, "internal error")

    def answer(self, answer: Answer | Result, started: float
               ) -> tuple[int, bytes, Headers]:
        """Status, JSON body and extra headers; the delivery counted in the metrics under
        its outcome class (``Result.outcome`` for one that reached the store)."""
        headers: Headers
        if isinstance(answer, Result):
            outcome = answer.outcome
            status, content, headers = answer.status, answer.body(), ()
        else:
            status, content, headers = answer
            outcome = {500: "error", 503: "unavailable"}.get(status, "rejected")
        if self._metrics is not None:
            self._metrics.delivery(outcome, time.perf_counter() - started)
        # Compact UTF-8, as Starlette's JSONResponse renders; the answers hold only strings,
        # numbers, lists and nulls, which orjson writes the same way about ten times faster.
        return status, orjson.dumps(content), headers
