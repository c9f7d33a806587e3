"""What ``GET /status`` shows, read in one pass: the budget, the queue, the last runs, the
poller's freshness per repository and the health checks (``StatusView``).

Everything comes from the shared store (and the governor's snapshot of it), so the page
says the same from any replica. The pure rendering is ``service.app.status_page``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from service.budget.governor import Governor
from service.budget.refusal import Refusal
from service.budget.snapshot import Snapshot
from service.intake.recovery.reader import CURSOR
from service.observe.health import Health
from service.storage import ledger, redeliveries, repository_polls, runs, watermarks
from service.storage import queue as queue_table
from service.storage.database import Database
from service.storage.queue import QueueRow
from service.storage.repository_polls import Poll
from service.storage.times import from_db_time

__all__ = ["RUNS_SHOWN", "WAITING_SHOWN", "Run", "StatusView", "Waiting", "read_status"]

WAITING_SHOWN: Final = 20
RUNS_SHOWN: Final = 15


@dataclass(frozen=True)
class Waiting:
    """A pending row, and why it waits: a retry delay (``not_before``), a budget refusal,
    or neither (next in line)."""

    row: QueueRow
    not_before: datetime | None
    refusal: Refusal | None


@dataclass(frozen=True)
class Run:
    """One ledger row (an admitted run, or one in progress) and its publication."""

    dedupe_key: str
    repo: str
    pr_number: int
    mode: str
    stop_reason: str | None     # None: still running
    tokens: int                 # used, or reserved while running
    confidence: str | None
    cost_usd: float | None
    started_at: datetime
    settled_at: datetime | None
    publication: str | None     # runs' publication state, when a run was recorded
    #: What it was: ``pr_opened`` (automatic), or what a comment asked for (``review``,
    #: ``describe``, ``ask``); ``-`` when its queue row is gone.
    kind: str = "-"


@dataclass(frozen=True)
class StatusView:
    now: datetime
    health: dict[str, Any]
    budget: Snapshot
    queue: dict[str, int]           # rows by status
    waiting: tuple[Waiting, ...]    # the oldest pending rows, oldest first
    claimed: tuple[QueueRow, ...]   # running now
    runs: tuple[Run, ...]
    polls: tuple[Poll, ...]
    #: The delivery log: the newest delivery read (None: never read, or the reader is
    #: off) and the redeliveries asked for that have not come in yet.
    log_read_up_to: datetime | None = None
    redeliveries_awaited: int = 0


def read_status(store: Database, governor: Governor, health: Health,
                now: datetime) -> StatusView:
    """Everything the page shows at ``now``."""
    with store.read() as tx:
        depth = queue_table.depth(tx)
        pending = queue_table.listing(tx, statuses=[queue_table.PENDING], limit=WAITING_SHOWN,
                                      oldest_first=True)
        claimed = queue_table.listing(tx, statuses=[queue_table.CLAIMED], limit=WAITING_SHOWN)
        recent = ledger.recent(tx, RUNS_SHOWN)
        states = {r["dedupe_key"]: runs.state(tx, r["dedupe_key"], now) for r in recent}
        kinds = {r["dedupe_key"]: queue_table.row(tx, r["dedupe_key"]) for r in recent}
        polls = repository_polls.latest(tx)
        log_cursor = watermarks.read(tx, CURSOR)
        awaited = len(redeliveries.pending(tx))
    counts = dict.fromkeys(queue_table.STATUSES, 0)
    for status, _, n in depth:
        counts[status] += n
    refusals = governor.waiting([queue_table.as_candidate(r) for r in pending], now)
    waiting = tuple(
        Waiting(row=r, not_before=r.leased_until if r.leased_until and r.leased_until > now
                else None, refusal=refusal)
        for r, refusal in zip(pending, refusals, strict=True))
    return StatusView(
        now=now, health=health.report(now), budget=governor.snapshot(now), queue=counts,
        waiting=waiting, claimed=tuple(claimed),
        runs=tuple(_run(r, states.get(r["dedupe_key"]), kinds[r["dedupe_key"]])
                   for r in recent), polls=tuple(polls),
        log_read_up_to=log_cursor, redeliveries_awaited=awaited)


def _run(row: dict[str, Any], state: tuple[str, str] | None,
         queued: queue_table.QueueRow | None) -> Run:
    used = row["used_tokens"]
    return Run(
        dedupe_key=str(row["dedupe_key"]), repo=str(row["repo"] or ""),
        pr_number=int(row["pr_number"] or 0), mode=str(row["mode"]),
        stop_reason=None if row["settled_at"] is None else str(row["stop_reason"]),
        tokens=int(used if used is not None else row["reserved_tokens"]),
        confidence=None if row["usage_confidence"] is None else str(row["usage_confidence"]),
        cost_usd=None if row["cost_usd"] is None else float(row["cost_usd"]),
        started_at=from_db_time(str(row["reserved_at"])),
        settled_at=None if row["settled_at"] is None else from_db_time(str(row["settled_at"])),
        publication=None if state is None else state[0],
        kind="-" if queued is None else queued.asked_for)

