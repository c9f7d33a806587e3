"""The durable review queue: enqueue, claim with a lease, finish, release.

Every row's lifecycle is the one table ``TRANSITIONS`` below; each write in this module
names the event it performs and takes its ``WHERE status IN (...)`` and ``SET status``
from that table, so the SQL cannot drift from the documented lifecycle.

``claim`` is where spending is decided, so it is written for the budget governor:
it walks candidates in FIFO order inside one transaction and leases the first one the
``admit`` hook accepts; the transaction is ``concurrent``, so on PostgreSQL several hosts
claim at once, each candidate taken with ``FOR UPDATE SKIP LOCKED``. The hook is a plain
predicate; this module imports nothing from ``service.budget``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final, cast

from service.model.jobs import Command, CommentSource, Job, Kind
from service.storage.database import Database, Transaction
from service.storage.lifecycle import Lifecycle
from service.storage.times import from_db_time, to_db_time

log = logging.getLogger(__name__)

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
_in: Final = LIFECYCLE.sql_in


# --- SQL, derived from the table above -----------------------------------------------

_COLUMNS = (
    "dedupe_key, kind, repo, pr_number, head_sha, actor_id, status, attempts, "
    "enqueued_at, leased_until, owner, comment_id, comment_source, command"
)

# Several jobs go in one multi-row INSERT (``enqueue_many``): the webhook receiver records a
# whole batch of deliveries in one transaction, a few statements for the lot. A conflicting
# key changes nothing unless it revives a cancelled pr_opened; RETURNING names the rows
# inserted or revived, which are the new ones.
_INSERT_HEAD = """
INSERT INTO queue (dedupe_key, kind, repo, pr_number, head_sha, actor_id, status,
                   attempts, enqueued_at, comment_id, comment_source, command)
VALUES """
_INSERT_ROW = f"(?, ?, ?, ?, ?, ?, '{PENDING}', 0, ?, ?, ?, ?)"
_INSERT_TAIL = f"""
ON CONFLICT (dedupe_key) DO UPDATE SET status = '{target("revive")}',
                                       enqueued_at = excluded.enqueued_at
 WHERE queue.status IN {_in("revive")} AND queue.kind = 'pr_opened'
RETURNING dedupe_key
"""
#: Rows per INSERT: far under SQLite's limit of 32 766 bound values.
_CHUNK: Final = 500

# A status that is 'claimed' with a lapsed lease is, for every purpose, not leased. On a
# 'pending' row ``leased_until`` is a not-before time: a failed attempt handed back with a
# retry delay (``release(not_before=)``); NULL means at once.
_LEASE_LAPSED = (f"((status = '{PENDING}' AND (leased_until IS NULL OR leased_until <= :now))"
                 f" OR (status = '{CLAIMED}' AND leased_until <= :now))")

# ``{skip}`` is the store's ``skip_locked``: on PostgreSQL two hosts claiming at once each
# take the rows the other is not already handling, and never wait on one another for them.
_ABANDON_EXHAUSTED = f"""
UPDATE queue SET status = '{target("abandon")}', leased_until = NULL
 WHERE dedupe_key IN (
        SELECT dedupe_key FROM queue
         WHERE status IN {_in("abandon")} AND attempts >= :max_attempts AND {_LEASE_LAPSED}
         {{skip}})
RETURNING dedupe_key
"""

# The attempt that died stays counted (it was counted when it was claimed).
_RECOVER_LAPSED = f"""
UPDATE queue SET status = '{target("recover")}', owner = NULL, leased_until = NULL
 WHERE dedupe_key IN (
        SELECT dedupe_key FROM queue
         WHERE status IN {_in("recover")} AND leased_until <= :now {{skip}})
RETURNING dedupe_key, attempts
"""

_CLAIMABLE = f"status IN {_in('claim')} AND {_LEASE_LAPSED} AND attempts < :max_attempts"

# A live lease on the pull request ``:repo``/``:pr_number``.
_PULL_LEASED = (f"SELECT 1 FROM queue WHERE repo = :repo AND pr_number = :pr_number"
                f" AND status = '{CLAIMED}' AND leased_until > :now")

# Walked lazily in FIFO order; deliberately no LIMIT: the admit hook may refuse the head
# (a pr_opened at MENTION_ONLY) and the mention behind it must still be reachable.
# One pull request is reviewed by one worker at a time: a row whose pull request holds a
# live lease is skipped, not waited on. The walk itself locks nothing (a FOR UPDATE here
# would lock every candidate at once); each candidate is taken on its own (``_TAKE_ROW``).
CLAIMABLE_SQL = f"""
SELECT {_COLUMNS} FROM queue
 WHERE {_CLAIMABLE}
   AND NOT EXISTS (
        SELECT 1 FROM queue AS other
         WHERE other.repo = queue.repo AND other.pr_number = queue.pr_number
           AND other.status = '{CLAIMED}' AND other.leased_until > :now)
 ORDER BY enqueued_at, dedupe_key
"""

# The same walk a page at a time, after the row ``(:after_at, :after_key)``: on a database
# server a statement's rows all come to the client at once, and a backlog of thousands
# would be fetched whole for every claim, which almost always takes the first.
_CLAIMABLE_PAGE = CLAIMABLE_SQL.replace(
    " ORDER BY enqueued_at, dedupe_key",
    "   AND (enqueued_at > :after_at OR (enqueued_at = :after_at AND dedupe_key > :after_key))"
    " ORDER BY enqueued_at, dedupe_key LIMIT :page")
_PAGE: Final = 32
_KEY_AT, _ENQUEUED_AT = 0, _COLUMNS.split(", ").index("enqueued_at")

# One candidate, still claimable, locked for this transaction (or skipped when another
# claim holds it).
_TAKE_ROW = f"SELECT 1 FROM queue WHERE dedupe_key = :key AND {_CLAIMABLE} {{skip}}"

_TAKE_LEASE = f"""
UPDATE queue SET status = '{target("claim")}', owner = :owner, leased_until = :until,
                 attempts = attempts + 1
 WHERE dedupe_key = :key AND status IN {_in("claim")} AND {_LEASE_LAPSED}
"""

_FINISH = f"""
UPDATE queue SET status = '{target("finish")}', leased_until = NULL
 WHERE dedupe_key = :key AND owner = :owner AND status IN {_in("finish")}
"""

_RELEASE = f"""
UPDATE queue SET status = '{target("release")}', leased_until = :not_before, owner = NULL
 WHERE dedupe_key = :key AND owner = :owner AND status IN {_in("release")}
"""

# The attempt is given back: the plan's usage limit stopped the run, which says nothing
# about the trigger, so waiting for the reset must not use up its attempts.
_DEFER = f"""
UPDATE queue SET status = '{target("defer")}', leased_until = :not_before, owner = NULL,
                 attempts = attempts - 1
 WHERE dedupe_key = :key AND owner = :owner AND status IN {_in("defer")}
"""

_RENEW = f"""
UPDATE queue SET leased_until = :until
 WHERE dedupe_key = :key AND owner = :owner AND status = '{CLAIMED}'
"""

# One statement for every pull request that got a new pr_opened: (repo, number, newest key).
_SUPERSEDE_OLDER = f"""
UPDATE queue SET status = '{target("supersede")}'
  FROM (VALUES {{}}) AS newest
 WHERE queue.kind = 'pr_opened' AND queue.repo = newest.column1
   AND queue.pr_number = newest.column2 AND queue.dedupe_key != newest.column3
   AND queue.status IN {_in("supersede")}
RETURNING queue.repo, queue.pr_number
"""

_CANCEL_PR = f"""
UPDATE queue SET status = '{target("cancel")}'
 WHERE repo = :repo AND pr_number = :pr_number AND status IN {_in("cancel")}
 RETURNING dedupe_key
"""


@dataclass(frozen=True)
class Lease:
    """Who holds a row, until when, and which attempt this is (counting this one)."""

    owner: str
    until: datetime
    attempt: int


@dataclass(frozen=True)
class Claim:
    """A leased queue row: the job, and the lease of the worker that must do it.

    ``dedupe_key`` is the row's key as stored (the job builds the same one); the other
    properties read through to the job and the lease.
    """

    dedupe_key: str
    job: Job
    enqueued_at: datetime
    lease: Lease

    @property
    def kind(self) -> str:
        return self.job.kind

    @property
    def repo(self) -> str:
        return self.job.repo

    @property
    def pr_number(self) -> int:
        return self.job.pr_number

    @property
    def head_sha(self) -> str | None:
        return self.job.head_sha

    @property
    def actor_id(self) -> int:
        return self.job.actor_id

    @property
    def comment_id(self) -> int | None:
        return self.job.comment_id

    @property
    def comment_source(self) -> str | None:
        return self.job.comment_source

    @property
    def command(self) -> str:
        return self.job.command

    @property
    def owner(self) -> str:
        return self.lease.owner

    @property
    def leased_until(self) -> datetime:
        return self.lease.until

    @property
    def attempts(self) -> int:
        """Attempts including this one."""
        return self.lease.attempt


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
    def job(self) -> Job:
        """The job the row holds."""
        return Job(kind=cast(Kind, self.kind), repo=self.repo, pr_number=self.pr_number,
                   actor_id=self.actor_id, head_sha=self.head_sha,
                   comment_id=self.comment_id,
                   comment_source=cast("CommentSource | None", self.comment_source),
                   command=cast(Command, self.command))


LapsedHook = Callable[[Transaction, Sequence[str], datetime], None]
"""Told, inside the claim's transaction, the keys whose lease lapsed (recovered or
abandoned): the budget closes their open reservations as ``lost``."""

AdmitHook = Callable[[Transaction, Claim, datetime], bool]
"""True admits the candidate, False refuses it (the walk moves on to the next one).

A hook may instead raise ``NothingAdmissible`` when its answer cannot depend on the
candidate (an exhausted budget): the claim then ends at once with None instead of
walking every pending row only to refuse each for the same reason.
"""


class NothingAdmissible(Exception):
    """Raised by an admit hook: no candidate can be admitted at this instant."""


def _row(values: Sequence[object]) -> QueueRow:
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
    claim holding no lease."""
    return Claim(dedupe_key=row.dedupe_key, job=row.job, enqueued_at=row.enqueued_at,
                 lease=Lease(owner="", until=row.enqueued_at, attempt=row.attempts + 1))


def queue_row(tx: Transaction, dedupe_key: str) -> QueueRow | None:
    """The row of ``dedupe_key`` as stored, read through the caller's transaction."""
    values = tx.execute(f"SELECT {_COLUMNS} FROM queue WHERE dedupe_key = ?",
                        (dedupe_key,)).fetchone()
    return None if values is None else _row(values)


_RECENT_PENDING = f"""
SELECT {_COLUMNS} FROM queue WHERE status = '{PENDING}' AND enqueued_at > :since
 ORDER BY enqueued_at, dedupe_key
"""


_INSPECT = "SELECT status, attempts, owner, leased_until FROM queue WHERE dedupe_key = ?"


def inspect(tx: Transaction, dedupe_key: str) -> dict[str, object] | None:
    """What an operator's report shows of the row (times as stored)."""
    row = tx.execute(_INSPECT, (dedupe_key,)).fetchone()
    return None if row is None else dict(zip(("status", "attempts", "owner", "leased_until"),
                                             row, strict=True))


_KNOWN_HEADS = ("SELECT head_sha FROM queue WHERE repo = ? AND pr_number = ?"
                " AND kind = 'pr_opened'")
_LAST_OPENED = ("SELECT MAX(enqueued_at) FROM queue"
                " WHERE repo = ? AND pr_number = ? AND kind = 'pr_opened'")


def depth(tx: Transaction) -> list[tuple[str, str, int]]:
    """How many rows the queue holds, by ``(status, kind)``."""
    return [(str(status), str(kind), int(n)) for status, kind, n in tx.execute(
        "SELECT status, kind, COUNT(*) FROM queue GROUP BY status, kind ORDER BY 1, 2")]


_RETRY = f"""
UPDATE queue SET status = '{target("retry")}', attempts = 0, leased_until = NULL, owner = NULL
 WHERE dedupe_key = :key AND status IN {_in("retry")}
"""
_CANCEL_ONE = f"""
UPDATE queue SET status = '{target("cancel")}'
 WHERE dedupe_key = :key AND status IN {_in("cancel")}
"""


def retry_in(tx: Transaction, dedupe_key: str) -> bool:
    """Offer an abandoned or cancelled row again, attempts reset; False changes nothing."""
    return tx.execute(_RETRY, {"key": dedupe_key}).rowcount == 1


def cancel_in(tx: Transaction, dedupe_key: str) -> bool:
    """Cancel one pending row (a claimed one is running: left to its worker)."""
    return tx.execute(_CANCEL_ONE, {"key": dedupe_key}).rowcount == 1


def listing(tx: Transaction, *, statuses: Sequence[str] = (), repo: str | None = None,
            limit: int = 50, oldest_first: bool = False) -> list[QueueRow]:
    """The newest ``limit`` rows (of ``statuses``, of ``repo``), newest first; with
    ``oldest_first``, the oldest ``limit`` of them, oldest first (the order they are
    claimed in)."""
    unknown = set(statuses) - set(STATUSES)
    if unknown:
        raise ValueError(f"unknown status(es): {sorted(unknown)}")
    where: list[str] = []
    params: list[object] = []
    if statuses:
        where.append("status IN (" + ", ".join("?" for _ in statuses) + ")")
        params.extend(statuses)
    if repo is not None:
        where.append("repo = ?")
        params.append(repo)
    sql = (f"SELECT {_COLUMNS} FROM queue" + (" WHERE " + " AND ".join(where) if where else "")
           + (" ORDER BY enqueued_at, dedupe_key" if oldest_first
              else " ORDER BY enqueued_at DESC, dedupe_key DESC") + " LIMIT ?")
    return [_row(v) for v in tx.execute(sql, (*params, limit))]


def known_heads(tx: Transaction, repo: str, pr_number: int) -> set[str]:
    """Every head sha a ``pr_opened`` row was ever enqueued for on this pull request."""
    return {str(sha) for (sha,) in tx.execute(_KNOWN_HEADS, (repo, pr_number))}


def last_opened_at(tx: Transaction, repo: str, pr_number: int) -> datetime | None:
    """When the newest ``pr_opened`` row of this pull request was enqueued, if any."""
    (at,) = tx.execute(_LAST_OPENED, (repo, pr_number)).fetchone()
    return None if at is None else from_db_time(str(at))


def recent_pending(tx: Transaction, since: datetime) -> list[QueueRow]:
    """Pending rows enqueued after ``since``, oldest first."""
    return [_row(v) for v in tx.execute(_RECENT_PENDING, {"since": to_db_time(since)})]


class ReviewQueue:
    """The queue over a ``Database``. Every method is one short write transaction."""

    def __init__(
        self,
        store: Database,
        *,
        lease: timedelta = DEFAULT_LEASE,
        max_attempts: int = MAX_ATTEMPTS,
    ) -> None:
        if lease <= timedelta(0):
            raise ValueError("lease must be positive")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self._store = store
        self.lease = lease
        self.max_attempts = max_attempts
        skip = store.skip_locked
        self._abandon_sql = _ABANDON_EXHAUSTED.format(skip=skip)
        self._recover_sql = _RECOVER_LAPSED.format(skip=skip)
        self._take_row_sql = _TAKE_ROW.format(skip=skip)

    # -- ingest -------------------------------------------------------------------------

    def enqueue(self, job: Job, *, now: datetime, conn: Transaction | None = None) -> bool:
        """Add ``job`` unless its dedupe key is already known; True if the row is new.

        A ``pr_opened`` row ``cancelled`` because its pull request closed comes back to
        ``pending`` (True) when the same trigger arrives again: the pull request reopened
        at the same head. A mention is not revived: nobody asked again.

        A new ``pr_opened`` supersedes every older *pending* ``pr_opened`` of the same
        pull request (status ``superseded``): only the newest head is worth paying for.
        Pass ``conn`` to enqueue inside a caller's transaction (the webhook receiver
        records the delivery and its enqueues together).
        """
        return self.enqueue_many([(job, now)], conn=conn)[0]

    def enqueue_many(self, jobs: Sequence[tuple[Job, datetime]], *,
                     conn: Transaction | None = None) -> list[bool]:
        """``enqueue`` each ``(job, now)``, in order, in a few statements; one flag each.

        The outcome is the same as calling ``enqueue`` for each in turn: a key given twice
        is new at most once, and of several new heads of one pull request only the last
        stays pending.
        """
        if conn is None:
            with self._store.transaction() as own:
                return self._enqueue_many(own, jobs)
        return self._enqueue_many(conn, jobs)

    def _enqueue_many(self, conn: Transaction,
                      jobs: Sequence[tuple[Job, datetime]]) -> list[bool]:
        new: list[bool] = []
        for start in range(0, len(jobs), _CHUNK):
            new += self._insert(conn, jobs[start:start + _CHUNK])
        # The last new head of each pull request is the one that stays pending.
        newest: dict[tuple[str, int], str] = {}
        for (job, _), is_new in zip(jobs, new, strict=True):
            if is_new and job.kind == "pr_opened":
                newest[(job.repo, job.pr_number)] = job.dedupe_key
        if newest:
            self._supersede_older(conn, newest)
        return new

    def _insert(self, conn: Transaction,
                jobs: Sequence[tuple[Job, datetime]]) -> list[bool]:
        values: list[object] = []
        for job, now in jobs:
            values += (job.dedupe_key, job.kind, job.repo, job.pr_number, job.head_sha,
                       job.actor_id, to_db_time(now), job.comment_id, job.comment_source,
                       job.command)
        returned = {str(row[0]) for row in conn.execute(
            _INSERT_HEAD + ", ".join([_INSERT_ROW] * len(jobs)) + _INSERT_TAIL, values)}
        # A key given twice in one INSERT is new at most once: the first time.
        new = []
        for job, _ in jobs:
            new.append(job.dedupe_key in returned)
            returned.discard(job.dedupe_key)
        return new

    def _supersede_older(self, conn: Transaction,
                         newest: dict[tuple[str, int], str]) -> None:
        values: list[object] = []
        for (repo, pr_number), key in newest.items():
            values += (repo, pr_number, key)
        rows = conn.execute(
            _SUPERSEDE_OLDER.format(", ".join(["(?, ?, ?)"] * len(newest))), values
        ).fetchall()
        superseded = Counter((str(repo), int(pr)) for repo, pr in rows)
        for (repo, pr_number), count in superseded.items():
            log.info("superseded %d older pending review(s)", count, extra={
                "repo": repo, "pr": pr_number, "dedupe_key": newest[(repo, pr_number)]})

    def cancel_pull_request(
        self, repo: str, pr_number: int, *, conn: Transaction | None = None
    ) -> list[str]:
        """Cancel the pending rows of a pull request that closed; returns their keys.

        A row already claimed is left to its worker, which re-reads the pull request
        and settles at zero with ``closed``.
        """
        params = {"repo": repo, "pr_number": pr_number}
        if conn is None:
            with self._store.transaction() as own:
                rows = own.execute(_CANCEL_PR, params).fetchall()
        else:
            rows = conn.execute(_CANCEL_PR, params).fetchall()
        return [str(r[0]) for r in rows]

    # -- the claim ------------------------------------------------------------------------

    def claim(
        self, *, now: datetime | Callable[[], datetime], owner: str,
        admit: AdmitHook | None = None, lapsed: LapsedHook | None = None,
    ) -> Claim | None:
        """Lease the oldest claimable row that ``admit`` accepts, or return None.

        One concurrent transaction holds: rows out of attempts become ``abandoned``; rows
        whose worker's lease lapsed go back to ``pending`` (their attempt counted), and
        ``lapsed`` is told both sets — all of this whether or not anything is admitted
        after; candidates (pending, whose pull request has no live lease) are offered to
        ``admit`` oldest first; the first accepted is leased with ``attempts + 1``. A
        refused candidate is left exactly as it was: refusal costs no attempt. ``admit``
        runs inside the transaction, so whatever it writes (the budget reservation)
        commits with the lease or not at all.

        Beside other hosts' claims (PostgreSQL), each candidate is taken with its row
        locked (``skip_locked``: a row another claim holds is passed over) and its pull
        request's named lock (``try_lock``), and only then is the pull request checked for
        a live lease again, so two claims never lease one pull request. ``admit`` and
        ``lapsed`` serialise what they read and write themselves (the budget's lock).

        ``now`` may be the clock itself (what the workers pass): it is then read once the
        transaction has begun, so a claim that waited for its connection or the write lock
        (a busy file, a database restarting) is stamped when it is made — its reservation
        is never dated before a budget policy it was admitted under.
        """
        if not owner:
            raise ValueError("owner must be a non-empty string")
        with self._store.transaction(concurrent=True) as conn:
            at = now() if callable(now) else now
            until = at + self.lease
            params = {"now": to_db_time(at), "max_attempts": self.max_attempts}
            abandoned = [key for (key,) in conn.execute(self._abandon_sql, params)]
            if abandoned:
                log.warning("abandoned %d row(s) after %d attempts", len(abandoned),
                            self.max_attempts)
            recovered = list(conn.execute(self._recover_sql, params))
            for key, attempts in recovered:
                log.warning("a worker's lease lapsed; the row is pending again",
                            extra={"dedupe_key": key, "attempt": attempts})
            if lapsed is not None and (abandoned or recovered):
                lapsed(conn, [*abandoned, *(key for key, _ in recovered)], at)
            for row in self._candidates(conn, params):
                if not self._take(conn, row, params):
                    continue
                candidate = Claim(dedupe_key=row.dedupe_key, job=row.job,
                                  enqueued_at=row.enqueued_at,
                                  lease=Lease(owner=owner, until=until,
                                              attempt=row.attempts + 1))
                try:
                    if admit is not None and not admit(conn, candidate, at):
                        continue
                except NothingAdmissible:
                    return None
                taken = conn.execute(_TAKE_LEASE, {
                    "key": row.dedupe_key, "owner": owner, "until": to_db_time(until),
                    "now": params["now"],
                }).rowcount
                if taken != 1:  # pragma: no cover - impossible: the row is locked as ours
                    raise RuntimeError(f"lease on {row.dedupe_key} vanished mid-claim")
                return candidate
        return None

    def _candidates(self, conn: Transaction, params: dict[str, object]
                    ) -> Iterator[QueueRow]:
        """The claimable rows in FIFO order, read as the walk needs them: lazily from the
        file's cursor, a page at a time from a server."""
        if self._store.in_process:
            yield from (_row(values) for values in conn.execute(CLAIMABLE_SQL, params))
            return
        after_at, after_key = "", ""
        while True:
            page = conn.execute(_CLAIMABLE_PAGE, {**params, "after_at": after_at,
                                                  "after_key": after_key,
                                                  "page": _PAGE}).fetchall()
            for values in page:
                yield _row(values)
            if len(page) < _PAGE:
                return
            # The last row's stored values, as the keyset compares them.
            after_key, after_at = str(page[-1][_KEY_AT]), str(page[-1][_ENQUEUED_AT])

    def _take(self, conn: Transaction, row: QueueRow, params: dict[str, object]) -> bool:
        """Lock ``row`` and its pull request for this claim, if both are free and the row
        is still claimable with no live lease on its pull request."""
        if conn.execute(self._take_row_sql, {**params, "key": row.dedupe_key}
                        ).fetchone() is None:
            return False  # another claim holds it, or took it since the walk began
        if not self._store.try_lock(conn, f"pull:{row.repo}#{row.pr_number}"):
            return False  # another claim is leasing this pull request right now
        return conn.execute(_PULL_LEASED, {**params, "repo": row.repo,
                                           "pr_number": row.pr_number}).fetchone() is None

    # -- after the work -------------------------------------------------------------------

    def finish(self, dedupe_key: str, owner: str) -> bool:
        """Mark the row done if ``owner`` still holds it; False changes nothing."""
        with self._store.transaction(concurrent=True) as conn:
            return self.finish_in(conn, dedupe_key, owner)

    def finish_in(self, conn: Transaction, dedupe_key: str, owner: str) -> bool:
        """``finish`` inside a caller's transaction (settle + record + finish together)."""
        return conn.execute(_FINISH, {"key": dedupe_key, "owner": owner}).rowcount == 1

    def release(self, dedupe_key: str, owner: str, *, not_before: datetime | None = None
                ) -> bool:
        """Hand the row back as pending (its attempt stays counted) if ``owner`` holds it;
        with ``not_before`` no claim takes it before that time (a retry delay)."""
        params = {"key": dedupe_key, "owner": owner,
                  "not_before": None if not_before is None else to_db_time(not_before)}
        with self._store.transaction(concurrent=True) as conn:
            return conn.execute(_RELEASE, params).rowcount == 1

    def defer_in(self, conn: Transaction, dedupe_key: str, owner: str, *,
                 until: datetime) -> bool:
        """Hand the row back as pending until ``until`` *with its attempt uncounted* (the
        plan's usage limit stopped the run) if ``owner`` holds it, in the caller's
        transaction (the settle that trips the breaker)."""
        return conn.execute(_DEFER, {"key": dedupe_key, "owner": owner,
                                     "not_before": to_db_time(until)}).rowcount == 1

    def renew(self, dedupe_key: str, owner: str, *, now: datetime) -> bool:
        """Extend a held lease to ``now + lease``; False if the lease is no longer ours."""
        with self._store.transaction(concurrent=True) as conn:
            return conn.execute(_RENEW, {
                "key": dedupe_key, "owner": owner, "until": to_db_time(now + self.lease),
            }).rowcount == 1

    # -- inspection -----------------------------------------------------------------------

    def get(self, dedupe_key: str) -> QueueRow | None:
        with self._store.read() as tx:
            return queue_row(tx, dedupe_key)

    def rows(self, statuses: Iterable[str] | None = None) -> list[QueueRow]:
        """Every row (or those in ``statuses``), oldest first."""
        sql = f"SELECT {_COLUMNS} FROM queue"
        wanted = tuple(statuses) if statuses is not None else ()
        if statuses is not None:
            unknown = set(wanted) - set(STATUSES)
            if unknown:
                raise ValueError(f"unknown status(es): {sorted(unknown)}")
            sql += " WHERE status IN (" + ", ".join("?" for _ in wanted) + ")"
        sql += " ORDER BY enqueued_at, dedupe_key"
        with self._store.read() as conn:
            return [_row(v) for v in conn.execute(sql, wanted)]

    def known_heads(self, repo: str, pr_number: int) -> set[str]:
        """Every head sha a ``pr_opened`` row was ever enqueued for on this pull request.

        The poller sees a pull request's current state, not the action that led there;
        a head it has not seen before on a pull request that already has one is a push.
        """
        with self._store.read() as tx:
            return known_heads(tx, repo, pr_number)

    def counts(self) -> dict[str, int]:
        """Rows per status (every status present, zero where none)."""
        with self._store.read() as conn:
            found = dict(conn.execute("SELECT status, COUNT(*) FROM queue GROUP BY status"))
        return {s: int(found.get(s, 0)) for s in STATUSES}
