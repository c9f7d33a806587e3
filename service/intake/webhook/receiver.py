"""The webhook route: the handler of the FastAPI route ``POST {server.webhook_path}``.

A delivery is checked in this order, each answered as DESIGN.md says:

1. size: a declared ``Content-Length`` over ``server.max_body_bytes`` is refused before a
   byte is read, and a body without one stops being read once it passes the limit (413),
   so an oversized request is never buffered;
2. signature: ``X-Hub-Signature-256`` over the raw bytes, constant-time, against every
   configured secret (401), before anything is parsed;
3. ``X-GitHub-Event`` and ``X-GitHub-Delivery`` present and of GitHub's shape (400);
4. one store transaction (``service.intake.webhook.deliveries``, by way of group commit): a
   delivery id already recorded changes nothing (200 ``{"duplicate": true}``); a body
   that is not a payload is that delivery's own 400; otherwise the delivery row and its
   effect commit together -- a ``ping`` (200), an installation change (202), or the
   trigger rules' decision applied to the queue (202). A store failure is the one 5xx: 503.

A delivery is answered only after the transaction holding it committed.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Final

import anyio
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from service.config.schema import Config
from service.github.webhooks import SignatureError, check_signature
from service.intake.webhook.deliveries import STORE_ERRORS, DeliveryLog, InstallationChange
from service.intake.webhook.delivery import Received, Result
from service.intake.webhook.group_commit import GroupCommit
from service.observe.metrics.instruments import Metrics
from service.storage.errors import is_contention, is_unavailable

__all__ = ["OFF_LOOP_BYTES", "RETRY_AFTER", "BodyBudget", "WebhookReceiver"]

log = logging.getLogger(__name__)

#: Bodies above this have their signature checked on a worker thread, not the event loop.
OFF_LOOP_BYTES: Final = 256 * 1024
MAX_EVENT_CHARS: Final = 100
MAX_DELIVERY_CHARS: Final = 200
RETRY_AFTER: Final = "5"

Answer = tuple[int, dict[str, object], dict[str, str]]


class _TooLarge(Exception):
    pass


class _Busy(Exception):
    pass


class BodyBudget:
    """Body bytes held at once across every request not yet answered
    (``server.max_buffered_body_bytes``): what unsigned traffic can make the process hold
    is this, whatever it declares. Used on the event loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.limit:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


#: GitHub's delivery ids are GUIDs; this admits them (and ids a test or a relay makes up)
#: and refuses anything that is not plain ASCII, which a column would store re-encoded.
_DELIVERY_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*")
_EVENT_NAME: Final = re.compile(r"[a-z][a-z0-9_]*")


def _github_header(request: Request, name: str, limit: int,
                   shape: re.Pattern[str]) -> str | None:
    value = request.headers.get(name, "").strip()
    return value if len(value) <= limit and shape.fullmatch(value) else None


async def _read_body(request: Request, limit: int, budget: BodyBudget,
                     taken: list[int]) -> bytes:
    """The body, refused (``_TooLarge``) as soon as it is known to exceed ``limit``, and
    (``_Busy``) when the bytes it would hold do not fit ``budget``; what it took of the
    budget is added to ``taken`` for the caller to give back."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    if declared.isdigit():
        if not budget.take(int(declared)):
            raise _Busy
        taken.append(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        if not declared.isdigit():  # chunked: taken as it comes
            if not budget.take(len(chunk)):
                raise _Busy
            taken.append(len(chunk))
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _error(status: int, message: str, **headers: str) -> Answer:
    return status, {"error": message}, headers


class WebhookReceiver:
    """The webhook route's handler (``handle``): the checks in the module docstring's
    order, then the delivery handed to group commit and answered once committed."""

    def __init__(self, config: Config, deliveries: DeliveryLog, clock: Callable[[], datetime],
                 on_installation_change: Callable[[InstallationChange], None] | None,
                 on_enqueued: Callable[[], None] | None = None, *,
                 metrics: Metrics | None = None) -> None:
        self.limit: Final = config.server.max_body_bytes
        self.budget: Final = BodyBudget(config.server.max_buffered_body_bytes)
        self._metrics = metrics
        self._secrets = config.github.webhook_secrets
        self._writer: GroupCommit[Received, Result] = GroupCommit(
            deliveries.stage, deliveries.receive_batch,
            unavailable=lambda exc: is_unavailable(exc) or is_contention(exc))
        self._clock = clock
        self._on_change = on_installation_change
        self._on_enqueued = on_enqueued

    async def handle(self, request: Request) -> Response:
        """Answer one delivery (the FastAPI route's endpoint)."""
        started = time.perf_counter()
        try:
            answer = await self._answer(request)
        except Exception:
            log.exception("webhook receiver failed")
            answer = _error(500, "internal error")
        headers: dict[str, str]
        if isinstance(answer, Result):
            status, content, headers, outcome = (answer.status, answer.body(), {},
                                                 answer.outcome)
        else:
            status, content, headers = answer
            outcome = {500: "error", 503: "unavailable"}.get(status, "rejected")
        if self._metrics is not None:
            self._metrics.delivery(outcome, time.perf_counter() - started)
        return Response(orjson.dumps(content), status_code=status, headers=headers,
                        media_type="application/json")

    async def _answer(self, request: Request) -> Answer | Result:
        taken: list[int] = []
        try:
            return await self._answer_within(request, taken)
        finally:
            self.budget.give(sum(taken))

    async def _answer_within(self, request: Request, taken: list[int]) -> Answer | Result:
        try:
            body = await _read_body(request, self.limit, self.budget, taken)
        except _Busy:
            log.warning("webhook refused: too many body bytes held at once",
                        extra={"limit_bytes": self.budget.limit})
            return _error(503, "too many request bodies are being received at once",
                          **{"retry-after": RETRY_AFTER})
        except _TooLarge:
            log.warning("webhook refused: body over the limit",
                        extra={"limit_bytes": self.limit})
            return _error(413, f"body exceeds {self.limit} bytes", connection="close")
        except ClientDisconnect:
            return _error(400, "the client disconnected before the body was complete")
        if len(body) > OFF_LOOP_BYTES:
            checked = await anyio.to_thread.run_sync(self._check, request, body)
        else:
            checked = self._check(request, body)
        if not isinstance(checked, Received):
            return checked
        try:
            result = await self._writer.submit(checked)
        except Exception as exc:
            return self._failed(checked, exc)
        self._settle(result)
        return result

    def _check(self, request: Request, body: bytes) -> Answer | Received:
        """The signature over ``body``, then the GitHub headers: the delivery to record,
        or the answer refusing it."""
        try:
            check_signature(body, request.headers.get("x-hub-signature-256"), self._secrets)
        except SignatureError as exc:
            log.warning("webhook refused: bad signature", extra={"reason": exc.reason})
            return _error(401, f"signature check failed: {exc.reason}")
        event = _github_header(request, "x-github-event", MAX_EVENT_CHARS, _EVENT_NAME)
        delivery_id = _github_header(request, "x-github-delivery", MAX_DELIVERY_CHARS,
                                     _DELIVERY_ID)
        if event is None or delivery_id is None:
            missing = "X-GitHub-Event" if event is None else "X-GitHub-Delivery"
            return _error(400, f"missing or invalid {missing} header")
        return Received(delivery_id, event, body, request.headers.get("content-type"),
                        self._clock())

    @staticmethod
    def _failed(received: Received, exc: BaseException) -> Answer:
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
                      **{"retry-after": RETRY_AFTER})

    def _settle(self, result: Result) -> None:
        """After the commit: tell the poller of an installation change, wake the workers."""
        if result.change is not None and self._on_change is not None:
            try:
                self._on_change(result.change)
            except Exception:
                log.exception("installation-change callback failed",
                              extra={"delivery_id": result.delivery_id})
        if result.enqueued and self._on_enqueued is not None:
            self._on_enqueued()  # idle workers claim at once instead of at their next poll
