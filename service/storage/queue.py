"""The durable review queue: its lifecycle, its rows, and what reads and moves them.

Every row's lifecycle is the one table ``LIFECYCLE`` below; each write to the queue names
the event it performs and takes its ``WHERE status IN (...)`` and ``SET status`` from that
table, so the SQL cannot drift from the documented lifecycle. The queue is written by three
modules, each a function on the caller's transaction like every other table module:

- this one: the rows as stored (reads for operators, the status page, the poller) and an
  operator's moves (``retry``, ``cancel``);
- ``queue_enqueue``: what the webhook and the poller add (``enqueue_many``), and the
  pending rows of a pull request that closed (``cancel_pull_request``);
- ``queue_lease``: the worker's side — ``claim`` (the one operation that opens its own
  transaction: it reads the clock inside it), then ``finish``, ``release``, ``defer`` and
  ``renew`` on the lease it got.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, cast

from service.model.jobs import Command, CommentSource, Job, Kind
from service.storage.database import Transaction
from service.storage.lifecycle import Lifecycle
from service.storage.times import from_db_time, to_db_time

MAX_ATTEMPTS: Final = 3
DEFAULT_LEASE: Final = timedelta(seconds=1200)

# --- the lifecycle -------------------------------------------------------------------

PENDING: Final = "pending"
CLAIMED: Final = "claimed"
DONE: Final = "done"
ABANDONED: Final = "abandoned"
SUPERSEDED: Final = "superseded"
CANCELLED: Final = "cancelled"

STATUSES: Final = (PENDING, CLAIMED, DONE, ABANDONED, SUPERSEDED, CANCELLED)
TERMINAL: Final = frozenset({DONE, ABANDONED, SUPERSEDED})
#: Events only an operator performs (``pr-review-agent queue retry``): the one way out of a
#: terminal state, and only out of ``abandoned``.
OPERATOR_EVENTS: Final = frozenset({"retry"})

#: (event, from-status) -> to-status. The only place the lifecycle is written down.
#: ``claim`` from CLAIMED is the reclaim of an expired lease; ``abandon`` is a row that
#: has used every attempt and is no longer leased; ``recover`` hands back a row whose
#: worker died (its lease lapsed) at the start of every claim, admitted or not, so a dead
#: lease never outlives the next claim; ``defer`` hands a row back *without* counting its
#: attempt (the plan's usage limit stopped it: not the trigger's fault); ``supersede`` is
#: an older pending ``pr_opened`` replaced by a newer head of the same pull request;
#: ``cancel`` is a
#: pending row whose pull request closed before anyone claimed it; ``revive`` is the same
#: trigger arriving again for a cancelled row (the pull request reopened at the same head,
#: which builds the same dedupe key): without it that head could never be reviewed.
#: ``retry`` is an operator's: an abandoned or cancelled row offered again with every
#: attempt (the budget still decides when it runs).
LIFECYCLE: Final = Lifecycle("queue", STATUSES, {
    ("claim", PENDING): CLAIMED,
    ("claim", CLAIMED): CLAIMED,
    ("finish", CLAIMED): DONE,
    ("release", CLAIMED): PENDING,
    ("defer", CLAIMED): PENDING,
    ("recover", CLAIMED): PENDING,
    ("abandon", PENDING): ABANDONED,
    ("abandon", CLAIMED): ABANDONED,
    ("supersede", PENDING): SUPERSEDED,
    ("cancel", PENDING): CANCELLED,
    ("revive", CANCELLED): PENDING,
    ("retry", ABANDONED): PENDING,
    ("retry", CANCELLED): PENDING,
})
TRANSITIONS: Final = LIFECYCLE.transitions
sources: Final = LIFECYCLE.sources
target: Final = LIFECYCLE.target



COLUMNS: Final = (
    "dedupe_key, kind, repo, pr_number, head_sha, actor_id, status, attempts, "
    "enqueued_at, leased_until, owner, comment_id, comment_source, command"
)


@dataclass(frozen=True)
class Lease:
    """Who holds a row, until when, and which attempt this is (counting this one)."""

    owner: str
    until: datetime
    attempt: int


@dataclass(frozen=True)
class Claim:
    """A leased queue row: the job, and the lease of the worker that must do it."""

    job: Job
    lease: Lease

    @property
    def dedupe_key(self) -> str:
        """The row's key (the job builds the one it is stored under)."""
        return self.job.dedupe_key


@dataclass(frozen=True)
class QueueRow:
    """A row as stored, for inspection (operators, tests, the chaos accounting)."""

    dedupe_key: str
    kind: str
    repo: str
    pr_number: int
    head_sha: str | None
    actor_id: int
    status: str
    attempts: int
    enqueued_at: datetime
    leased_until: datetime | None
    owner: str | None
    comment_id: int | None
    comment_source: str | None
    command: str

    @property
    def asked_for(self) -> str:
        """What the row is, in a listing: ``pr_opened`` (automatic), or what a comment asked
        for (``review``, ``describe``, ``ask``)."""
        return self.command if self.kind == "mention" else self.kind

    @property
    def job(self) -> Job:
        """The job the row holds."""
        return Job(kind=cast(Kind, self.kind), repo=self.repo, pr_number=self.pr_number,
                   actor_id=self.actor_id, head_sha=self.head_sha,
                   comment_id=self.comment_id,
                   comment_source=cast("CommentSource | None", self.comment_source),
                   command=cast(Command, self.command))


def decode(values: Sequence[object]) -> QueueRow:
    """A ``QueueRow`` from one row of ``SELECT {COLUMNS}``."""
    (key, kind, repo, pr, head, actor, status, attempts, enq, until, owner, cid, csrc,
     command) = tuple(values)
    return QueueRow(
        dedupe_key=str(key), kind=str(kind), repo=str(repo), pr_number=int(str(pr)),
        head_sha=None if head is None else str(head), actor_id=int(str(actor)),
        status=str(status), attempts=int(str(attempts)), enqueued_at=from_db_time(str(enq)),
        leased_until=None if until is None else from_db_time(str(until)),
        owner=None if owner is None else str(owner),
        comment_id=None if cid is None else int(str(cid)),
        comment_source=None if csrc is None else str(csrc), command=str(command),
    )


def as_candidate(row: QueueRow) -> Claim:
    """A pending row as the budget governor's question (``Governor.waiting``) takes it: a
    claim holding no lease, on the attempt it would be."""
    return Claim(job=row.job, lease=Lease(owner="", until=row.enqueued_at,
                                          attempt=row.attempts + 1))


# --- reads ---------------------------------------------------------------------------

_RECENT_PENDING = f"""
SELECT {COLUMNS} FROM queue WHERE status = '{PENDING}' AND enqueued_at > :since
 ORDER BY enqueued_at, dedupe_key
"""
_INSPECT = "SELECT status, attempts, owner, leased_until FROM queue WHERE dedupe_key = ?"
_KNOWN_HEADS = ("SELECT head_sha FROM queue WHERE repo = ? AND pr_number = ?"
                " AND kind = 'pr_opened'")
_LAST_OPENED = ("SELECT MAX(enqueued_at) FROM queue"
                " WHERE repo = ? AND pr_number = ? AND kind = 'pr_opened'")


def row(tx: Transaction, dedupe_key: str) -> QueueRow | None:
    """The row of ``dedupe_key`` as stored."""
    values = tx.execute(f"SELECT {COLUMNS} FROM queue WHERE dedupe_key = ?",
                        (dedupe_key,)).fetchone()
    return None if values is None else decode(values)


def _checked(statuses: Sequence[str]) -> Sequence[str]:
    unknown = set(statuses) - set(STATUSES)
    if unknown:
        raise ValueError(f"unknown status(es): {sorted(unknown)}")
    return statuses


def rows(tx: Transaction, statuses: Sequence[str] | None = None) -> list[QueueRow]:
    """Every row (or those in ``statuses``), oldest first."""
    sql = f"SELECT {COLUMNS} FROM queue"
    wanted = () if statuses is None else tuple(_checked(statuses))
    if statuses is not None:
        sql += " WHERE status IN (" + ", ".join("?" for _ in wanted) + ")"
    return [decode(v) for v in tx.execute(sql + " ORDER BY enqueued_at, dedupe_key", wanted)]


def counts(tx: Transaction) -> dict[str, int]:
    """Rows per status (every status present, zero where none)."""
    found = dict(tx.execute("SELECT status, COUNT(*) FROM queue GROUP BY status"))
    return {s: int(found.get(s, 0)) for s in STATUSES}


def inspect(tx: Transaction, dedupe_key: str) -> dict[str, object] | None:
    """What an operator's report shows of the row (times as stored)."""
    found = tx.execute(_INSPECT, (dedupe_key,)).fetchone()
    return None if found is None else dict(zip(
        ("status", "attempts", "owner", "leased_until"), found, strict=True))


def depth(tx: Transaction) -> list[tuple[str, str, int]]:
    """How many rows the queue holds, by ``(status, kind)``; a question counts as kind
    ``ask``, not as the mention it also is."""
    return [(str(status), str(kind), int(n)) for status, kind, n in tx.execute(
        "SELECT status, CASE WHEN command = 'ask' THEN 'ask' ELSE kind END AS k, COUNT(*)"
        " FROM queue GROUP BY status, k ORDER BY 1, 2")]


def listing(tx: Transaction, *, statuses: Sequence[str] = (), repo: str | None = None,
            limit: int = 50, oldest_first: bool = False) -> list[QueueRow]:
    """The newest ``limit`` rows (of ``statuses``, of ``repo``), newest first; with
    ``oldest_first``, the oldest ``limit`` of them, oldest first (the order they are
    claimed in)."""
    where: list[str] = []
    params: list[object] = []
    if statuses:
        where.append("status IN (" + ", ".join("?" for _ in _checked(statuses)) + ")")
        params.extend(statuses)
    if repo is not None:
        where.append("repo = ?")
        params.append(repo)
    sql = (f"SELECT {COLUMNS} FROM queue" + (" WHERE " + " AND ".join(where) if where else "")
           + (" ORDER BY enqueued_at, dedupe_key" if oldest_first
              else " ORDER BY enqueued_at DESC, dedupe_key DESC") + " LIMIT ?")
    return [decode(v) for v in tx.execute(sql, (*params, limit))]


def known_heads(tx: Transaction, repo: str, pr_number: int) -> set[str]:
    """Every head sha a ``pr_opened`` row was ever enqueued for on this pull request.

    The poller sees a pull request's current state, not the action that led there; a head
    it has not seen before on a pull request that already has one is a push.
    """
    return {str(sha) for (sha,) in tx.execute(_KNOWN_HEADS, (repo, pr_number))}


def last_opened_at(tx: Transaction, repo: str, pr_number: int) -> datetime | None:
    """When the newest ``pr_opened`` row of this pull request was enqueued, if any."""
    (at,) = tx.execute(_LAST_OPENED, (repo, pr_number)).fetchone()
    return None if at is None else from_db_time(str(at))


def recent_pending(tx: Transaction, since: datetime) -> list[QueueRow]:
    """Pending rows enqueued after ``since``, oldest first."""
    return [decode(v) for v in tx.execute(_RECENT_PENDING, {"since": to_db_time(since)})]


# --- an operator's moves (``pr-review-agent queue retry|cancel``) ---------------------

_RETRY = f"""
UPDATE queue SET status = '{target("retry")}', attempts = 0, leased_until = NULL, owner = NULL
 WHERE dedupe_key = :key AND status IN {LIFECYCLE.sql_in("retry")}
"""
_CANCEL_ONE = f"""
UPDATE queue SET status = '{target("cancel")}'
 WHERE dedupe_key = :key AND status IN {LIFECYCLE.sql_in("cancel")}
"""


def retry(tx: Transaction, dedupe_key: str) -> bool:
    """Offer an abandoned or cancelled row again, attempts reset; False changes nothing."""
    return tx.execute(_RETRY, {"key": dedupe_key}).rowcount == 1


def cancel(tx: Transaction, dedupe_key: str) -> bool:
    """Cancel one pending row (a claimed one is running: left to its worker)."""
    return tx.execute(_CANCEL_ONE, {"key": dedupe_key}).rowcount == 1
