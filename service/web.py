"""The HTTP face of the service: the signed webhook receiver, ``/healthz`` and ``/budget``.

``create_app(...)`` builds a FastAPI app from its dependencies (no globals, no environment
reads). The webhook route checks, in this order, each answered as DESIGN.md's contract says:

1. size: a declared ``Content-Length`` over ``server.max_body_bytes`` is refused before a
   byte is read, and a body without one stops being read once it passes the limit (413),
   so an oversized request is never buffered;
2. signature: ``X-Hub-Signature-256`` over the raw bytes, constant-time, against every
   configured secret (401);
3. headers and body: ``X-GitHub-Event`` and ``X-GitHub-Delivery`` present, the body JSON or
   a form carrying ``payload=`` (400);
4. one store transaction (``DeliveryLog.ingest``): a delivery id already recorded changes
   nothing (200 ``{"duplicate": true}``); otherwise the delivery row and its effect commit
   together -- a ``ping`` (200), an installation change to ``repositories`` (202), or the
   trigger rules' decision applied to the queue (202). A store failure is the one 5xx: 503.
"""

from __future__ import annotations

import hmac
import logging
import re
import sqlite3
from collections.abc import Callable, Mapping
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

__all__ = ["Delivery", "DeliveryLog", "InstallationChange", "Result", "create_app"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: Bodies above this are verified and parsed in a worker thread, not on the event loop.
OFF_LOOP_BYTES: Final = 256 * 1024
MAX_EVENT_CHARS: Final = 100
MAX_DELIVERY_CHARS: Final = 200
RETRY_AFTER: Final = "5"
STORE_ERRORS: Final = (sqlite3.Error, StoreClosedError, OSError)
_MAX_SQL_INT: Final = 2**63 - 1
_REPO: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_INSTALLATION_EVENTS: Final = ("installation", "installation_repositories")
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
class Delivery:
    """One verified, parsed webhook delivery."""

    delivery_id: str
    event: str
    payload: Mapping[str, Any]

    @property
    def action(self) -> str | None:
        return safe_text(self.payload.get("action"), 100)

    @property
    def installation_id(self) -> int | None:
        inst = self.payload.get("installation")
        return _sql_id(inst.get("id")) if isinstance(inst, Mapping) else None

    def log_fields(self) -> dict[str, object]:
        """``delivery_id``, ``event``, ``action``, ``repo``, ``pr`` for the log line."""
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

    def body(self) -> dict[str, object]:
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
    """Records deliveries and carries out what they ask, one transaction per delivery.

    ``ingest`` runs on a worker thread (SqliteStore connections are per thread). The trigger
    rules run inside the transaction, so their ``agent_comments`` lookup reads through it.
    """

    def __init__(self, store: SqliteStore, queue: ReviewQueue,
                 triggers: Callable[[], TriggerContext]) -> None:
        self._store = store
        self._queue = queue
        self._triggers = triggers

    def ingest(self, delivery: Delivery, now: datetime) -> Result:
        """Record ``delivery`` and apply it, or report it a duplicate. Store errors raise."""
        with self._store.transaction() as conn:
            if conn.execute(_SEEN, (delivery.delivery_id,)).fetchone() is not None:
                return Result(200, "duplicate", delivery.delivery_id)
            if delivery.event == "ping":
                result = Result(200, "ping", delivery.delivery_id)
            elif delivery.event in _INSTALLATION_EVENTS:
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
            # still answered (and recorded) rather than failed: the poller remains a backstop.
            log.exception("trigger rules failed on a delivery",
                          extra={"delivery_id": delivery.delivery_id})
            return Ignore("malformed_payload", f"the rules failed ({type(exc).__name__})")
        # The rules check ids are positive, not that they fit a 64-bit column.
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
            result.ignored = "malformed_payload"
            result.outcome = "ignored:malformed_payload"
            return result
        if change is None:
            result.ignored = f"action:{delivery.action}"
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


def _verify_and_parse(body: bytes, signature: str | None, content_type: str | None,
                      secrets: tuple[Secret, ...]) -> dict[str, Any]:
    check_signature(body, signature, secrets)
    return parse_body(body, content_type)


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
    """The webhook route: the checks in the module docstring's order, then the store."""

    def __init__(self, config: Config, deliveries: DeliveryLog, clock: Clock,
                 on_installation_change: Callable[[InstallationChange], None] | None) -> None:
        self._limit = config.server.max_body_bytes
        self._secrets = config.github.webhook_secrets
        self._deliveries = deliveries
        self._clock = clock
        self._on_change = on_installation_change
        # One writer thread at a time from this process. SQLite serialises writers anyway,
        # and a thread left waiting on its lock sleeps in coarse steps (1, 2, 5, 10 ms ...),
        # which p99 would then measure. Built on first use: anyio needs a running loop.
        self._writer: anyio.CapacityLimiter | None = None

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
        content_type = request.headers.get("content-type")
        try:
            if len(body) > OFF_LOOP_BYTES:
                payload = await anyio.to_thread.run_sync(
                    _verify_and_parse, body, signature, content_type, self._secrets)
            else:
                payload = _verify_and_parse(body, signature, content_type, self._secrets)
        except SignatureError as exc:
            log.warning("webhook refused: bad signature", extra={"reason": exc.reason})
            return _error(401, f"signature check failed: {exc.reason}")
        except PayloadError as exc:
            return _error(400, f"unparseable body: {exc}")
        event = _header(request, "x-github-event", MAX_EVENT_CHARS)
        delivery_id = _header(request, "x-github-delivery", MAX_DELIVERY_CHARS)
        if event is None or delivery_id is None:
            missing = "X-GitHub-Event" if event is None else "X-GitHub-Delivery"
            return _error(400, f"missing or invalid {missing} header")
        return await self._ingest(Delivery(delivery_id=delivery_id, event=event,
                                           payload=payload))

    async def _ingest(self, delivery: Delivery) -> Response:
        if self._writer is None:
            self._writer = anyio.CapacityLimiter(1)
        try:
            result = await anyio.to_thread.run_sync(
                self._deliveries.ingest, delivery, self._clock(), limiter=self._writer)
        except Exception as exc:
            # The transaction rolled back, so nothing was recorded and a redelivery will be
            # processed in full: 503 is the honest answer whatever failed.
            store_fault = isinstance(exc, STORE_ERRORS)
            log.error("webhook not recorded: " + ("store failure" if store_fault
                                                  else "unexpected error"),
                      exc_info=not store_fault,
                      extra={**delivery.log_fields(), "error": type(exc).__name__})
            return _error(503, "the store is unavailable; nothing was recorded",
                          {"Retry-After": RETRY_AFTER})
        log.info("webhook delivery", extra={
            **delivery.log_fields(), "outcome": result.outcome, "enqueued": result.enqueued,
            "installation_id": delivery.installation_id,
        })
        if result.change is not None and self._on_change is not None:
            try:
                self._on_change(result.change)
            except Exception:
                log.exception("installation-change callback failed",
                              extra=delivery.log_fields())
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
    app.add_api_route(config.server.webhook_path, receiver, methods=["POST"],
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
