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
line run on one writer thread, which takes every delivery that arrived while it was busy
as one batch: one transaction, one WAL sync, one thread hop for the lot, each delivery in
a savepoint of its own (``_GroupCommit``, ``DeliveryLog``). A delivery is answered only
after its transaction committed.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import logging
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect

from service.budget import Governor
from service.config import Config, Secret
from service.github.webhooks import PayloadError, SignatureError, check_signature, parse_body
from service.health import FAILING, Health
from service.ingest import apply_decision
from service.queue import ReviewQueue
from service.store import SqliteStore, StoreClosedError, to_db_time
from service.triggers import Close, Decision, Enqueue, Ignore, TriggerContext, classify_event

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
STORE_ERRORS: Final = (sqlite3.Error, StoreClosedError, OSError)
_MAX_SQL_INT: Final = 2**63 - 1
_REPO: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ADDS: Final = ("created", "unsuspend", "new_permissions_accepted")
_DROPS: Final = ("deleted", "suspend")

_SEEN = "SELECT 1 FROM deliveries WHERE delivery_id = ?"
_RECORD = (
    "INSERT INTO deliveries (delivery_id, event, action, installation_id, received_at, outcome)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)
_ADD_REPO = (
    "INSERT INTO repositories (repo, installation_id, added_at) VALUES (?, ?, ?)"
    " ON CONFLICT (repo) DO UPDATE SET installation_id = excluded.installation_id,"
    " added_at = CASE WHEN repositories.removed_at IS NULL THEN repositories.added_at"
    " ELSE excluded.added_at END, removed_at = NULL"
)
# Matching the installation keeps a late "removed" from an old installation from dropping
# a repository that has since moved to another one.
_DROP_REPO = (
    "UPDATE repositories SET removed_at = ?"
    " WHERE repo = ? AND installation_id = ? AND removed_at IS NULL"
)
_DROP_INSTALLATION = (
    "UPDATE repositories SET removed_at = ? WHERE installation_id = ? AND removed_at IS NULL"
    " RETURNING repo"
)


def safe_text(value: object, limit: int = 200) -> str | None:
    """A string fit for a column, a log line or a JSON answer: valid UTF-8, cut to ``limit``."""
    if not isinstance(value, str):
        return None
    return value[:limit].encode("utf-8", "replace").decode("utf-8")


def _sql_id(value: object) -> int | None:
    """A positive id that fits a SQLite INTEGER, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_SQL_INT:
        return None
    return value


@dataclass(frozen=True)
class Received:
    """A delivery whose signature verified; its body not yet parsed."""

    delivery_id: str
    event: str
    body: bytes
    content_type: str | None

    def parse(self) -> Delivery:
        """The parsed delivery (``PayloadError`` if the body is not a payload)."""
        return Delivery(self.delivery_id, self.event, parse_body(self.body, self.content_type))


@dataclass(frozen=True)
class Delivery:
    """One verified, parsed webhook delivery."""

    delivery_id: str
    event: str
    payload: Mapping[str, Any]

    @functools.cached_property
    def action(self) -> str | None:
        return safe_text(self.payload.get("action"), 100)

    @functools.cached_property
    def installation_id(self) -> int | None:
        inst = self.payload.get("installation")
        return _sql_id(inst.get("id")) if isinstance(inst, Mapping) else None

    def log_fields(self) -> dict[str, object]:
        """``delivery_id``, ``event``, ``action``, ``repo``, ``pr``, ``installation_id``."""
        p = self.payload
        repo = p.get("repository")
        numbers = [p.get("number")] + [
            obj.get("number") for obj in (p.get("pull_request"), p.get("issue"))
            if isinstance(obj, Mapping)
        ]
        return {
            "delivery_id": self.delivery_id, "event": self.event, "action": self.action,
            "repo": safe_text(repo.get("full_name")) if isinstance(repo, Mapping) else None,
            "pr": next((n for n in numbers if _sql_id(n) is not None), None),
            "installation_id": self.installation_id,
        }


@dataclass(frozen=True)
class InstallationChange:
    """What an ``installation`` / ``installation_repositories`` delivery changed."""

    installation_id: int
    action: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


@dataclass
class Result:
    """What one delivery did: the HTTP answer and the ``deliveries.outcome`` recorded."""

    status: int
    outcome: str
    delivery_id: str
    enqueued: list[str] = field(default_factory=list)
    ignored: str | None = None
    change: InstallationChange | None = None
    error: str | None = None  # a 400: the body was not a payload (nothing recorded)

    def body(self) -> dict[str, object]:
        if self.error is not None:
            return {"error": self.error}
        if self.outcome == "duplicate":
            return {"duplicate": True}
        if self.outcome == "ping":
            return {"delivery": self.delivery_id, "ping": True}
        return {"delivery": self.delivery_id, "enqueued": self.enqueued, "ignored": self.ignored}


class _Malformed(Exception):
    """An installation payload without the fields needed to act on it."""


def _repos(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Malformed("a repository list is not an array")
    names = [item.get("full_name") if isinstance(item, Mapping) else None for item in value]
    if not all(isinstance(n, str) and _REPO.fullmatch(n) for n in names):
        raise _Malformed("a repository entry has no 'owner/name' full_name")
    return [str(n) for n in names]


class DeliveryLog:
    """Records deliveries and carries out what they ask. Runs on a worker thread.

    SqliteStore connections are per thread. The trigger rules run inside the transaction,
    so their ``agent_comments`` lookup reads through it.
    """

    def __init__(self, store: SqliteStore, queue: ReviewQueue,
                 triggers: Callable[[], TriggerContext]) -> None:
        self._store = store
        self._queue = queue
        self._triggers = triggers

    def ingest(self, delivery: Delivery, now: datetime) -> Result:
        """Record ``delivery`` and apply it in a transaction of its own. Store errors raise."""
        outcome = self.ingest_batch([(delivery, now)])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def receive_batch(
        self, batch: Sequence[tuple[Received, datetime]]
    ) -> list[Result | Exception]:
        """Parse each delivery (outside any transaction), then ``ingest_batch`` the lot.

        An unparseable body is a 400 result, recorded nowhere. If the transaction fails,
        every parsed delivery of the batch gets its exception.
        """
        outcomes: list[Result | Exception] = []
        parsed: list[tuple[int, tuple[Delivery, datetime]]] = []
        for received, now in batch:
            try:
                parsed.append((len(outcomes), (received.parse(), now)))
                outcomes.append(Result(0, "", received.delivery_id))  # replaced below
            except PayloadError as exc:
                log.warning("webhook refused: unparseable body", extra={
                    "delivery_id": received.delivery_id, "event": received.event,
                    "error": str(exc)})
                outcomes.append(Result(400, "unparseable", received.delivery_id,
                                       error=f"unparseable body: {exc}"))
        if parsed:
            try:
                done = self.ingest_batch([item for _, item in parsed])
            except Exception as exc:
                done = [exc] * len(parsed)
            for (index, _), outcome in zip(parsed, done, strict=True):
                outcomes[index] = outcome
        return outcomes

    def ingest_batch(
        self, batch: Sequence[tuple[Delivery, datetime]]
    ) -> list[Result | Exception]:
        """Several deliveries in one transaction, each inside a savepoint of its own.

        Group commit: one COMMIT (one WAL sync) for the lot. A delivery whose savepoint
        fails gets its exception and leaves no trace while the others commit; if the
        transaction itself fails (BEGIN or COMMIT), it raises and none was recorded. Each
        recorded delivery is logged once the commit is done.
        """
        outcomes: list[Result | Exception] = []
        with self._store.transaction() as conn:
            for delivery, now in batch:
                conn.execute("SAVEPOINT delivery")
                try:
                    result = self._one(conn, delivery, now)
                except Exception as exc:
                    conn.execute("ROLLBACK TO delivery")
                    conn.execute("RELEASE delivery")
                    outcomes.append(exc)
                else:
                    conn.execute("RELEASE delivery")
                    outcomes.append(result)
        for (delivery, _), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Result):
                log.info("webhook delivery", extra={
                    **delivery.log_fields(), "outcome": outcome.outcome,
                    "enqueued": outcome.enqueued})
        return outcomes

    def _one(self, conn: sqlite3.Connection, delivery: Delivery, now: datetime) -> Result:
        if conn.execute(_SEEN, (delivery.delivery_id,)).fetchone() is not None:
            return Result(200, "duplicate", delivery.delivery_id)
        if delivery.event == "ping":
            result = Result(200, "ping", delivery.delivery_id)
        elif delivery.event in ("installation", "installation_repositories"):
            result = self._installation(conn, delivery, now)
        else:
            result = self._trigger(conn, delivery, now)
        conn.execute(_RECORD, (
            delivery.delivery_id, delivery.event, delivery.action,
            delivery.installation_id, to_db_time(now), result.outcome,
        ))
        return result

    def _trigger(self, conn: sqlite3.Connection, delivery: Delivery, now: datetime) -> Result:
        decision = self._classify(delivery)
        applied = apply_decision(conn, self._queue, decision, now=now)
        result = Result(202, "", delivery.delivery_id,
                        enqueued=applied.enqueued + applied.duplicates,
                        ignored=safe_text(applied.ignored))
        if applied.enqueued:
            result.outcome = "enqueued"
        elif applied.duplicates:
            result.outcome = "already_queued"
        elif isinstance(decision, Close):
            result.outcome = f"closed:cancelled={len(applied.cancelled)}"
        else:
            result.outcome = f"ignored:{result.ignored}"
        return result

    def _classify(self, delivery: Delivery) -> Decision:
        try:
            decision = classify_event(delivery.event, delivery.payload, self._triggers())
        except STORE_ERRORS:
            raise
        except Exception as exc:
            # classify_event promises not to raise; if a rule does anyway, the delivery is
            # still answered (and recorded) rather than failed: the poller is the backstop.
            log.exception("trigger rules failed on a delivery",
                          extra={"delivery_id": delivery.delivery_id})
            return Ignore("malformed_payload", f"the rules failed ({type(exc).__name__})")
        # The rules check that ids are positive, not that they fit a 64-bit column.
        ids: tuple[int, ...]
        if isinstance(decision, Enqueue):
            job = decision.job
            ids = (job.pr_number, job.actor_id, job.comment_id or 1)
        elif isinstance(decision, Close):
            ids = (decision.pr_number,)
        else:
            return decision
        if any(_sql_id(i) is None for i in ids):
            return Ignore("malformed_payload", "an id does not fit in 64 bits")
        return decision

    def _installation(self, conn: sqlite3.Connection, delivery: Delivery,
                      now: datetime) -> Result:
        result = Result(202, "", delivery.delivery_id)
        try:
            change = _change_repositories(conn, delivery, to_db_time(now))
        except _Malformed as exc:
            log.warning("installation delivery not understood",
                        extra={"delivery_id": delivery.delivery_id, "error": str(exc)})
            change, result.ignored = None, "malformed_payload"
        if change is None:
            result.ignored = result.ignored or f"action:{delivery.action}"
            result.outcome = f"ignored:{result.ignored}"
            return result
        result.change = change
        result.outcome = (f"{delivery.event}:{change.action}:"
                          f"added={len(change.added)},removed={len(change.removed)}")
        return result


def _change_repositories(conn: sqlite3.Connection, delivery: Delivery,
                         at: str) -> InstallationChange | None:
    """Apply an installation delivery to ``repositories``; None for an action it ignores."""
    action = delivery.action
    installation_id = delivery.installation_id
    if action is None or installation_id is None:
        raise _Malformed("no action or no installation.id")
    p = delivery.payload
    if delivery.event == "installation":
        if action in _DROPS:
            dropped = [str(r[0]) for r in conn.execute(_DROP_INSTALLATION, (at, installation_id))]
            return InstallationChange(installation_id, action, removed=tuple(sorted(dropped)))
        if action not in _ADDS:
            return None
        added, removed = _repos(p.get("repositories")), []
    else:
        if action not in ("added", "removed"):
            return None
        added = _repos(p.get("repositories_added"))
        removed = _repos(p.get("repositories_removed"))
    for repo in added:
        conn.execute(_ADD_REPO, (repo, installation_id, at))
    for repo in removed:
        conn.execute(_DROP_REPO, (at, repo, installation_id))
    return InstallationChange(installation_id, action, tuple(added), tuple(removed))


# -- HTTP ----------------------------------------------------------------------------------


class _GroupCommit:
    """Hands deliveries to ``DeliveryLog.receive_batch`` from one flusher task at a time.

    Deliveries that arrive while a batch is being written wait and go together in the next
    one, so under load one transaction (one WAL sync, ~2 ms here) serves many. A lone
    delivery is written at once. Under load, though, the first arrival after a commit
    would go alone and the rest wait a whole sync behind it, so batches would alternate
    1, N, 1, N: when fewer than half as many are waiting as the previous batch held, the
    flusher waits up to ``COALESCE_SECONDS`` for them to arrive first.

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
        if len(self._pending) >= wanted:
            return
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
            for _, _, future in batch + self._pending:  # only if the flusher was cancelled
                future.cancel()
            if batch:
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
                 on_installation_change: Callable[[InstallationChange], None] | None) -> None:
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
) -> FastAPI:
    """The web app.

    ``triggers`` returns the current ``TriggerContext`` and is called once per delivery, so
    a context replaced later (once the App's slug is known) applies at once. ``clock``
    returns aware UTC now. ``on_installation_change`` is called on the event loop after an
    installation change has committed, so the poller can refresh its repository list.
    """
    admin_token = config.server.admin_token
    receiver = _Receiver(config, DeliveryLog(store, queue, triggers), clock,
                         on_installation_change)
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
