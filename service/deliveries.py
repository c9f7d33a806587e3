"""Webhook deliveries into the store: one transaction records a batch and what it asks for.

The webhook receiver (``service.receiver``) checks size, signature and headers on the
event loop and hands each delivery here as ``Received`` (raw body). ``DeliveryLog`` runs on
the writer thread (``service.group_commit``): it parses the body, skips a delivery id
already recorded (a redelivery), and otherwise records the delivery in ``deliveries``
together with its effect, in the same transaction:

- ``ping``: nothing else;
- ``installation`` / ``installation_repositories``: the ``repositories`` table (added,
  removed, the installation id), reported back as an ``InstallationChange``;
- anything else: the trigger rules' decision (``service.triggers.classify_event``) applied
  to the queue through ``service.ingest.apply_decision``, the seam shared with the poller,
  so an event seen by both paths becomes one queue row.

A crash or a failure before COMMIT leaves neither the delivery nor its effect. Several
deliveries share one transaction (group commit); one that fails on its own is retried
alone so that it cannot fail the others.
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from service.github.webhooks import PayloadError, parse_body
from service.ingest import apply_decision
from service.queue import ReviewQueue
from service.store import SqliteStore, StoreClosedError, is_contention, to_db_time
from service.triggers import Close, Decision, Enqueue, Ignore, TriggerContext, classify_event

__all__ = [
    "STORE_ERRORS",
    "Delivery",
    "DeliveryLog",
    "InstallationChange",
    "Received",
    "Result",
    "safe_text",
]

log = logging.getLogger(__name__)

#: What a store outage looks like from here (answered 503 by the receiver).
STORE_ERRORS: Final = (sqlite3.Error, StoreClosedError, OSError)
_MAX_SQL_INT: Final = 2**63 - 1
_REPO: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ADDS: Final = ("created", "unsuspend", "new_permissions_accepted")
_DROPS: Final = ("deleted", "suspend")

_SEEN = "SELECT delivery_id FROM deliveries WHERE delivery_id IN ({})"
_RECORD = (
    "INSERT INTO deliveries (delivery_id, event, action, installation_id, received_at, outcome)"
    " VALUES "
)
_ROW = "(?, ?, ?, ?, ?, ?)"
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
        """Several deliveries in one transaction: one COMMIT (one WAL sync) for the lot.

        Raises when the transaction cannot be had or kept (contention past the busy
        timeout, a closed store): none was recorded. If one delivery fails otherwise, the
        batch is rolled back and each delivery written alone, so only that one gets its
        exception. Each recorded delivery is logged once its commit is done.
        """
        try:
            outcomes: list[Result | Exception] = list(self._write(batch))
        except Exception as exc:
            if len(batch) == 1 or is_contention(exc) or isinstance(exc, StoreClosedError):
                raise
            outcomes = []
            for item in batch:
                try:
                    outcomes.extend(self._write([item]))
                except Exception as alone:
                    outcomes.append(alone)
        for (delivery, _), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Result):
                log.info("webhook delivery", extra={
                    **delivery.log_fields(), "outcome": outcome.outcome,
                    "enqueued": outcome.enqueued})
        return outcomes

    def _write(self, batch: Sequence[tuple[Delivery, datetime]]) -> list[Result]:
        # Few statements per delivery on purpose: sqlite3 releases the GIL around every
        # one, and each release can hand the GIL to the event loop and back (two context
        # switches). So: one SELECT for the batch's ids, one INSERT for its rows.
        ids = [delivery.delivery_id for delivery, _ in batch]
        results: list[Result] = []
        rows: list[object] = []
        with self._store.transaction() as conn:
            seen = {str(row[0]) for row in conn.execute(
                _SEEN.format(", ".join("?" * len(ids))), ids)}
            for delivery, now in batch:
                if delivery.delivery_id in seen:  # recorded before, or earlier in this batch
                    results.append(Result(200, "duplicate", delivery.delivery_id))
                    continue
                seen.add(delivery.delivery_id)
                result = self._apply(conn, delivery, now)
                rows += (delivery.delivery_id, delivery.event, delivery.action,
                         delivery.installation_id, to_db_time(now), result.outcome)
                results.append(result)
            if rows:
                conn.execute(_RECORD + ", ".join([_ROW] * (len(rows) // 6)), rows)
        return results

    def _apply(self, conn: sqlite3.Connection, delivery: Delivery, now: datetime) -> Result:
        if delivery.event == "ping":
            return Result(200, "ping", delivery.delivery_id)
        if delivery.event in ("installation", "installation_repositories"):
            return self._installation(conn, delivery, now)
        return self._trigger(conn, delivery, now)

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
