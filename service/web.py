"""The HTTP face of the service: the signed webhook receiver, ``/healthz`` and ``/budget``.

``create_app(...)`` builds a FastAPI app from its dependencies (no globals, no environment
reads). A webhook delivery is checked in this order, each answered as DESIGN.md says:

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

Steps 1-3 (but the parse) run on the event loop. Parsing, the rules, the store and the log
line run on one writer thread (``service.deliveries.DeliveryLog``), which takes every
delivery that arrived while it was busy as one batch: one transaction, one WAL sync, one
thread hop for the lot (``_GroupCommit``). A delivery is answered only after the
transaction holding it committed.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Final

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from service.budget import Governor
from service.config import Config, Secret
from service.deliveries import (
    STORE_ERRORS,
    Delivery,
    DeliveryLog,
    InstallationChange,
    Received,
    Result,
)
from service.github.webhooks import SignatureError, check_signature
from service.health import FAILING, Health
from service.queue import ReviewQueue
from service.store import SqliteStore
from service.triggers import TriggerContext

__all__ = ["Delivery", "DeliveryLog", "InstallationChange", "Received", "Result", "create_app"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: Bodies above this have their signature checked on a worker thread, not the event loop.
OFF_LOOP_BYTES: Final = 256 * 1024
#: At most this many deliveries share one transaction (bounds how long the lock is held).
MAX_BATCH: Final = 128
#: How long a flush under load may wait for the rest of a batch to arrive.
COALESCE_SECONDS: Final = 0.002
MAX_EVENT_CHARS: Final = 100
MAX_DELIVERY_CHARS: Final = 200
RETRY_AFTER: Final = "5"


class _GroupCommit:
    """Hands deliveries to ``DeliveryLog.receive_batch`` from one flusher task at a time.

    Deliveries that arrive while a batch is being written wait and go together in the next
    one, so under load one transaction (one WAL sync, ~2 ms here) serves many. A lone
    delivery is written at once. Under load, though, the first arrival after a commit
    would go alone and the rest wait a whole sync behind it, so batches would alternate
    1, N, 1, N: when fewer than half as many are waiting as the previous batch held, and
    that batch was answered moments ago, the flusher waits up to ``COALESCE_SECONDS`` for
    them to arrive first.

    Being the only writer of this process also keeps our threads from queueing on SQLite's
    lock, whose busy handler sleeps in coarse steps (1, 2, 5, 10 ms ...). The flusher is a
    task of its own, not part of any request, so a client that hangs up mid-write cannot
    strand the deliveries batched with its own.
    """

    def __init__(self, deliveries: DeliveryLog) -> None:
        self._deliveries = deliveries
        self._pending: list[tuple[Received, datetime, asyncio.Future[Result]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._last_batch = 0
        self._last_end = 0.0  # loop time the last batch was answered
        self._wanted = 0
        self._enough = asyncio.Event()

    async def submit(self, received: Received, now: datetime) -> Result:
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        self._pending.append((received, now, future))
        if self._wanted and len(self._pending) >= self._wanted:
            self._enough.set()
        if self._flusher is None:
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _coalesce(self) -> None:
        wanted = self._last_batch // 2
        idle = asyncio.get_running_loop().time() - self._last_end
        if len(self._pending) >= wanted or idle > COALESCE_SECONDS * 5:
            return  # enough are here, or the last batch was a while ago: no load to wait for
        self._wanted = wanted
        self._enough.clear()
        try:
            await asyncio.wait_for(self._enough.wait(), COALESCE_SECONDS)
        except TimeoutError:
            pass
        finally:
            self._wanted = 0

    async def _flush(self) -> None:
        batch: list[tuple[Received, datetime, asyncio.Future[Result]]] = []
        try:
            while self._pending:
                await self._coalesce()
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                self._last_batch = len(batch)
                try:
                    outcomes = await anyio.to_thread.run_sync(
                        self._deliveries.receive_batch, [(r, now) for r, now, _ in batch])
                except Exception as exc:
                    outcomes = [exc] * len(batch)
                self._last_end = asyncio.get_running_loop().time()
                for (_, _, future), outcome in zip(batch, outcomes, strict=True):
                    if future.done():  # its request was cancelled meanwhile
                        continue
                    if isinstance(outcome, Exception):
                        future.set_exception(outcome)
                    else:
                        future.set_result(outcome)
                batch = []
        finally:
            self._flusher = None
            # Only when the flusher itself was cancelled (the loop is shutting down).
            for _, _, future in batch + self._pending:
                future.cancel()
            self._pending = []


class _TooLarge(Exception):
    pass


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused (``_TooLarge``) as soon as it is known to exceed ``limit``."""
    declared = request.headers.get("content-length", "").strip()
    if declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


def _header(request: Request, name: str, limit: int) -> str | None:
    value = request.headers.get(name, "").strip()
    return value if value and len(value) <= limit and value.isprintable() else None


def _bearer_matches(header: str | None, token: Secret) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                               token.reveal().encode("utf-8"))


class _Receiver:
    """The webhook route: the checks in the module docstring's order, then the writer."""

    def __init__(self, config: Config, deliveries: DeliveryLog, clock: Clock,
                 on_installation_change: Callable[[InstallationChange], None] | None,
                 on_enqueued: Callable[[], None] | None = None) -> None:
        self._on_enqueued = on_enqueued
        self._limit = config.server.max_body_bytes
        self._secrets = config.github.webhook_secrets
        self._writer = _GroupCommit(deliveries)
        self._clock = clock
        self._on_change = on_installation_change

    async def __call__(self, request: Request) -> Response:
        try:
            body = await _read_body(request, self._limit)
        except _TooLarge:
            log.warning("webhook refused: body over the limit",
                        extra={"limit_bytes": self._limit})
            return _error(413, f"body exceeds {self._limit} bytes", {"Connection": "close"})
        except ClientDisconnect:
            return _error(400, "the client disconnected before the body was complete")
        signature = request.headers.get("x-hub-signature-256")
        try:
            if len(body) > OFF_LOOP_BYTES:
                await anyio.to_thread.run_sync(check_signature, body, signature, self._secrets)
            else:
                check_signature(body, signature, self._secrets)
        except SignatureError as exc:
            log.warning("webhook refused: bad signature", extra={"reason": exc.reason})
            return _error(401, f"signature check failed: {exc.reason}")
        event = _header(request, "x-github-event", MAX_EVENT_CHARS)
        delivery_id = _header(request, "x-github-delivery", MAX_DELIVERY_CHARS)
        if event is None or delivery_id is None:
            missing = "X-GitHub-Event" if event is None else "X-GitHub-Delivery"
            return _error(400, f"missing or invalid {missing} header")
        received = Received(delivery_id, event, body, request.headers.get("content-type"))
        try:
            result = await self._writer.submit(received, self._clock())
        except Exception as exc:
            # The transaction rolled back, so nothing was recorded and a redelivery will be
            # processed in full: 503 is the honest answer whatever failed.
            store_fault = isinstance(exc, STORE_ERRORS)
            log.error("webhook not recorded: " + ("store failure" if store_fault
                                                  else "unexpected error"),
                      exc_info=not store_fault, extra={
                          "delivery_id": delivery_id, "event": event,
                          "error": type(exc).__name__})
            return _error(503, "the store is unavailable; nothing was recorded",
                          {"Retry-After": RETRY_AFTER})
        if result.change is not None and self._on_change is not None:
            try:
                self._on_change(result.change)
            except Exception:
                log.exception("installation-change callback failed",
                              extra={"delivery_id": delivery_id})
        if result.enqueued and self._on_enqueued is not None:
            self._on_enqueued()  # idle workers claim at once instead of at their next poll
        return JSONResponse(result.body(), status_code=result.status)


def create_app(
    *,
    config: Config,
    store: SqliteStore,
    queue: ReviewQueue,
    governor: Governor,
    triggers: Callable[[], TriggerContext],
    health: Health,
    clock: Clock,
    on_installation_change: Callable[[InstallationChange], None] | None = None,
    on_enqueued: Callable[[], None] | None = None,
) -> FastAPI:
    """The web app.

    ``triggers`` returns the current ``TriggerContext`` and is called once per delivery, so
    a context replaced later (once the App's slug is known) applies at once. ``clock``
    returns aware UTC now. ``on_installation_change`` is called on the event loop after an
    installation change has committed, so the poller can refresh its repository list.
    ``on_enqueued`` is called after a delivery that queued work has committed (the
    workers' ``wake``).
    """
    admin_token = config.server.admin_token
    receiver = _Receiver(config, DeliveryLog(store, queue, triggers), clock,
                         on_installation_change, on_enqueued)
    app = FastAPI(title="pr-review-agent", docs_url=None, redoc_url=None, openapi_url=None)
    # A plain Starlette route: the receiver reads the raw request itself, so FastAPI's
    # parameter resolution would be pure overhead on the hottest path.
    app.add_route(config.server.webhook_path, receiver.__call__, methods=["POST"],
                  include_in_schema=False)

    @app.get("/healthz")
    async def healthz() -> Response:
        report = await anyio.to_thread.run_sync(health.report, clock())
        return JSONResponse(report, status_code=503 if report["status"] == FAILING else 200)

    @app.get("/budget")
    async def budget(request: Request) -> Response:
        if admin_token is not None and not _bearer_matches(
                request.headers.get("authorization"), admin_token):
            return _error(401, "a valid admin bearer token is required",
                          {"WWW-Authenticate": "Bearer"})
        try:
            snapshot = await anyio.to_thread.run_sync(governor.snapshot, clock())
        except STORE_ERRORS as exc:
            log.error("budget snapshot failed: store failure",
                      extra={"error": type(exc).__name__})
            return _error(503, "the store is unavailable", {"Retry-After": RETRY_AFTER})
        return JSONResponse(snapshot.as_json())

    return app
