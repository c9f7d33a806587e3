"""The ``checks`` table: each trigger's check run, as it should show and as it was shown.

One row per trigger and head (a mention whose pull request moved on before its review
gets a second row on the head it reviewed). Each row holds what the check run *should*
show — status, conclusion, title, summary, link — written in the same transaction as the
event that decides it (the claim's job starting, a job's ending, a publication's outcome,
a deferral), and a ``version`` counting those changes; ``shown_version`` is the version
GitHub was last told. The check-run loop (``service.publish.checks.loop``) pushes every row whose
version is ahead, so a crash between an event and its push loses nothing: the next pass
pushes the latest state, whatever came in between.

A row's status follows ``TRANSITIONS``: ``queued`` and ``in_progress`` go back and forth
(a failed attempt waits for its retry), ``completed`` is final — it may be reworded (its
link added once the review is posted) but never reopened. ``create_started_at`` is stamped
before the first ``POST``, so a create whose answer was lost is looked up by its
``external_id`` (the dedupe key) before another is made: never two check runs for one row.
The queries that find work (``untracked``, ``waiting``, ``ended_elsewhere``) read the queue
and the ledger beside this table; this module writes nothing but ``checks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from service.storage.database import Transaction
from service.storage.ledger import CHARGED_SQL
from service.storage.lifecycle import Lifecycle
from service.storage.queue import ABANDONED, CANCELLED, CLAIMED, PENDING, SUPERSEDED
from service.storage.times import from_db_time, to_db_time

__all__ = [
    "COMPLETED",
    "IN_PROGRESS",
    "QUEUED",
    "STATUSES",
    "TRANSITIONS",
    "CheckRow",
    "CheckState",
    "Ended",
    "Target",
    "Untracked",
    "Waiting",
    "creating",
    "ended_elsewhere",
    "lease",
    "owed",
    "pushed",
    "release",
    "renew",
    "rows",
    "show",
    "show_if_new",
    "show_open",
    "untracked",
    "waiting",
]

QUEUED: Final = "queued"
IN_PROGRESS: Final = "in_progress"
COMPLETED: Final = "completed"
STATUSES: Final = (QUEUED, IN_PROGRESS, COMPLETED)

#: A row is shown a status (the event is named for the status it shows); a new row may
#: start in any status, and a completed one stays completed.
LIFECYCLE: Final = Lifecycle("checks", STATUSES, {
    (QUEUED, QUEUED): QUEUED, (QUEUED, IN_PROGRESS): QUEUED,
    (IN_PROGRESS, QUEUED): IN_PROGRESS, (IN_PROGRESS, IN_PROGRESS): IN_PROGRESS,
    (COMPLETED, QUEUED): COMPLETED, (COMPLETED, IN_PROGRESS): COMPLETED,
    (COMPLETED, COMPLETED): COMPLETED,
})
TRANSITIONS: Final = LIFECYCLE.transitions
_OPEN: Final = "('" + "', '".join(s for s in STATUSES if s != COMPLETED) + "')"


@dataclass(frozen=True)
class CheckState:
    """What a check run shows: GitHub's ``status``, ``conclusion`` (completed only),
    ``output.title``, ``output.summary`` and ``details_url``."""

    status: str
    title: str
    summary: str
    conclusion: str | None = None
    details_url: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status must be one of {STATUSES}, got {self.status!r}")
        if (self.conclusion is None) != (self.status != COMPLETED):
            raise ValueError("a completed check run needs a conclusion, and only it has one")


@dataclass(frozen=True)
class Target:
    """Which check run: one trigger on one head, under the check's name."""

    dedupe_key: str
    head_sha: str
    repo: str
    pr_number: int
    name: str


@dataclass(frozen=True)
class CheckRow:
    """A row as stored: the target, what it should show, and what GitHub knows."""

    target: Target
    state: CheckState
    version: int
    shown_version: int
    check_run_id: int | None
    create_started_at: datetime | None
    updated_at: datetime


@dataclass(frozen=True)
class Untracked:
    """A queue row that has no check run yet."""

    dedupe_key: str
    kind: str
    repo: str
    pr_number: int
    head_sha: str | None
    command: str
    status: str  # pending or claimed, or a recent superseded or cancelled one
    merged: bool  # a cancelled row's pull request was merged
    charged: int = 0  # what the trigger's attempts were charged (the ledger's word)


@dataclass(frozen=True)
class Waiting:
    """A pending queue row whose check run is open, and what it waits for."""

    dedupe_key: str
    kind: str
    command: str
    attempts: int
    not_before: datetime | None       # a retry's delay, or a plan limit's reset
    last_stop_reason: str | None      # the ledger's word on the last attempt, if any


@dataclass(frozen=True)
class Ended:
    """A trigger the queue ended without a job (superseded, cancelled, abandoned) whose
    check run is still open."""

    dedupe_key: str
    status: str
    attempts: int
    last_stop_reason: str | None
    merged: bool  # a cancelled row's pull request was merged (not merely closed)
    charged: int = 0  # what the trigger's attempts were charged (the ledger's word)


_COLUMNS = ("dedupe_key, head_sha, repo, pr_number, name, status, conclusion, title, summary,"
            " details_url, version, shown_version, check_run_id, create_started_at,"
            " updated_at")


def _row(values: tuple[object, ...]) -> CheckRow:
    (key, head, repo, pr, name, status, conclusion, title, summary, url, version, shown,
     run_id, started, updated) = values
    return CheckRow(
        target=Target(str(key), str(head), str(repo), int(str(pr)), str(name)),
        state=CheckState(str(status), str(title), str(summary),
                         None if conclusion is None else str(conclusion),
                         None if url is None else str(url)),
        version=int(str(version)), shown_version=int(str(shown)),
        check_run_id=None if run_id is None else int(str(run_id)),
        create_started_at=None if started is None else from_db_time(str(started)),
        updated_at=from_db_time(str(updated)))


_ONE = f"SELECT {_COLUMNS} FROM checks WHERE dedupe_key = :key AND head_sha = :head"
_ROWS = f"SELECT {_COLUMNS} FROM checks WHERE dedupe_key = ? ORDER BY updated_at, head_sha"
_INSERT = """
INSERT INTO checks (dedupe_key, head_sha, repo, pr_number, name, status, conclusion, title,
                    summary, details_url, version, shown_version, updated_at)
SELECT :key, :head, :repo, :pr, :name, :status, :conclusion, :title, :summary, :url, 1, 0,
       :now
 WHERE NOT EXISTS (SELECT 1 FROM checks WHERE dedupe_key = :key {scope})
"""
_SET = """
UPDATE checks SET status = :status, conclusion = :conclusion, title = :title,
                  summary = :summary, details_url = :url, version = version + 1,
                  updated_at = :now
"""
_CHANGED = """
 AND NOT (status = :status AND COALESCE(conclusion, '') = COALESCE(:conclusion, '')
          AND title = :title AND summary = :summary
          AND COALESCE(details_url, '') = COALESCE(:url, ''))
"""


def _params(state: CheckState, now: datetime) -> dict[str, object]:
    return {"status": state.status, "conclusion": state.conclusion, "title": state.title,
            "summary": state.summary, "url": state.details_url, "now": to_db_time(now)}


def show(tx: Transaction, target: Target, state: CheckState, now: datetime) -> bool:
    """Make ``target``'s check run show ``state``; True when that changed what it should
    show (a new row, or a new state its status may take). A completed row never goes back
    to queued or in progress: False, nothing written."""
    params = {**_params(state, now), "key": target.dedupe_key, "head": target.head_sha,
              "repo": target.repo, "pr": target.pr_number, "name": target.name}
    if tx.execute(_INSERT.format(scope="AND head_sha = :head"), params).rowcount:
        return True
    return tx.execute(
        _SET + f" WHERE dedupe_key = :key AND head_sha = :head"
               f" AND status IN {LIFECYCLE.sql_in(state.status)}" + _CHANGED, params).rowcount > 0


def show_if_new(tx: Transaction, target: Target, state: CheckState, now: datetime) -> bool:
    """Start ``target``'s check run at ``state`` unless the trigger has one already (on
    any head): how the loop opens the check run of a trigger it has just found queued."""
    params = {**_params(state, now), "key": target.dedupe_key, "head": target.head_sha,
              "repo": target.repo, "pr": target.pr_number, "name": target.name}
    return tx.execute(_INSERT.format(scope=""), params).rowcount > 0


def show_open(tx: Transaction, dedupe_key: str, state: CheckState, now: datetime, *,
              only: str | None = None, except_head: str | None = None) -> int:
    """Make every open (not completed) check run of the trigger show ``state`` — only
    those in status ``only`` when given, all but the one on ``except_head`` when given;
    how many changed."""
    params = {**_params(state, now), "key": dedupe_key, "only": only, "head": except_head}
    where = f" WHERE dedupe_key = :key AND status IN {_OPEN}"
    if only is not None:
        where += " AND status = :only"
    if except_head is not None:
        where += " AND head_sha != :head"
    return tx.execute(_SET + where + f" AND status IN {LIFECYCLE.sql_in(state.status)}" + _CHANGED,
                      params).rowcount


def rows(tx: Transaction, dedupe_key: str) -> list[CheckRow]:
    """The trigger's check runs (one per head), oldest first."""
    return [_row(tuple(v)) for v in tx.execute(_ROWS, (dedupe_key,))]


# -- what the loop finds to do ----------------------------------------------------------

_MERGED = ("(SELECT p.merged FROM closed_pull_requests p"
           " WHERE p.repo = q.repo AND p.pr_number = q.pr_number)")

_CHARGED = CHARGED_SQL.format(key="q.dedupe_key")

_UNTRACKED = f"""
SELECT q.dedupe_key, q.kind, q.repo, q.pr_number, q.head_sha, q.command, q.status,
       {_MERGED}, {_CHARGED} FROM queue q
 WHERE (q.status IN ('{PENDING}', '{CLAIMED}')
        OR (q.status IN ('{SUPERSEDED}', '{CANCELLED}') AND q.enqueued_at >= :since))
   AND q.command <> 'ask'
   AND NOT EXISTS (SELECT 1 FROM checks c WHERE c.dedupe_key = q.dedupe_key)
 ORDER BY q.enqueued_at, q.dedupe_key LIMIT :limit
"""

_LAST_STOP = ("(SELECT l.stop_reason FROM ledger l WHERE l.dedupe_key = q.dedupe_key"
              " AND l.settled_at IS NOT NULL ORDER BY l.id DESC LIMIT 1)")

_WAITING = f"""
SELECT q.dedupe_key, q.kind, q.command, q.attempts, q.leased_until, {_LAST_STOP} FROM queue q
 WHERE q.status = '{PENDING}'
   AND EXISTS (SELECT 1 FROM checks c WHERE c.dedupe_key = q.dedupe_key
                AND c.status IN {_OPEN})
 ORDER BY q.enqueued_at, q.dedupe_key LIMIT :limit
"""

_ENDED = f"""
SELECT q.dedupe_key, q.status, q.attempts, {_LAST_STOP}, {_MERGED}, {_CHARGED} FROM queue q
 WHERE q.status IN ('{SUPERSEDED}', '{CANCELLED}', '{ABANDONED}')
   AND EXISTS (SELECT 1 FROM checks c WHERE c.dedupe_key = q.dedupe_key
                AND c.status IN {_OPEN})
 LIMIT :limit
"""


def untracked(tx: Transaction, since: datetime, limit: int) -> list[Untracked]:
    """Queue rows with no check run yet (an answer to a question never has one), oldest
    first: pending or claimed ones, and those enqueued since ``since`` that a newer head
    or a close ended before any was opened."""
    return [Untracked(str(k), str(kind), str(repo), int(pr), None if h is None else str(h),
                      str(cmd), str(status), bool(merged), int(charged))
            for k, kind, repo, pr, h, cmd, status, merged, charged in tx.execute(
                _UNTRACKED, {"since": to_db_time(since), "limit": limit})]


def waiting(tx: Transaction, limit: int) -> list[Waiting]:
    """Pending queue rows whose check run is open (queued, or in progress for a worker
    that has since stopped), oldest first."""
    return [Waiting(str(k), str(kind), str(cmd), int(attempts),
                    None if until is None else from_db_time(str(until)),
                    None if stop is None else str(stop))
            for k, kind, cmd, attempts, until, stop in tx.execute(_WAITING, {"limit": limit})]


def ended_elsewhere(tx: Transaction, limit: int) -> list[Ended]:
    """Triggers the queue ended without a job's word whose check run is still open."""
    return [Ended(str(k), str(status), int(attempts), None if stop is None else str(stop),
                  bool(merged), int(charged))
            for k, status, attempts, stop, merged, charged in tx.execute(
                _ENDED, {"limit": limit})]


# -- pushing ----------------------------------------------------------------------------

_OWED = f"""
SELECT {_COLUMNS} FROM checks
 WHERE version > shown_version AND updated_at >= :since
   AND (lease_until IS NULL OR lease_until <= :now)
 ORDER BY updated_at LIMIT :limit
"""
_LEASE = """
UPDATE checks SET lease_until = :until
 WHERE dedupe_key = :key AND head_sha = :head AND (lease_until IS NULL OR lease_until <= :now)
"""
_RENEW = """
UPDATE checks SET lease_until = :until
 WHERE dedupe_key = :key AND head_sha = :head AND lease_until IS NOT NULL
"""
_CREATING = """
UPDATE checks SET create_started_at = :now
 WHERE dedupe_key = :key AND head_sha = :head AND create_started_at IS NULL
"""
_PUSHED = """
UPDATE checks SET check_run_id = COALESCE(:run_id, check_run_id), lease_until = NULL,
                  shown_version = CASE WHEN shown_version > :version THEN shown_version
                                       ELSE :version END
 WHERE dedupe_key = :key AND head_sha = :head
"""
_RELEASE = "UPDATE checks SET lease_until = NULL WHERE dedupe_key = :key AND head_sha = :head"


def owed(tx: Transaction, *, since: datetime, now: datetime, limit: int) -> list[CheckRow]:
    """Rows GitHub has not been told the latest of, changed since ``since`` and not being
    pushed by anyone now, longest waiting first."""
    return [_row(tuple(v)) for v in tx.execute(_OWED, {
        "since": to_db_time(since), "now": to_db_time(now), "limit": limit})]


def lease(tx: Transaction, target: Target, now: datetime, until: datetime
          ) -> CheckRow | None:
    """Take the right to push ``target`` until ``until``: the row as it stands now (what
    was read before the lease may have been pushed since by whoever held it), or None
    when another holds it."""
    params = {"key": target.dedupe_key, "head": target.head_sha, "now": to_db_time(now),
              "until": to_db_time(until)}
    if tx.execute(_LEASE, params).rowcount != 1:
        return None
    return _row(tuple(tx.execute(_ONE, params).fetchone()))


def renew(tx: Transaction, target: Target, until: datetime) -> None:
    """Keep holding the push lease of ``target`` until ``until`` (a push still going)."""
    tx.execute(_RENEW, {"key": target.dedupe_key, "head": target.head_sha,
                        "until": to_db_time(until)})


def creating(tx: Transaction, target: Target, now: datetime) -> None:
    """A create is about to be sent: an answer lost after this is looked up, not redone."""
    tx.execute(_CREATING, {"key": target.dedupe_key, "head": target.head_sha,
                           "now": to_db_time(now)})


def pushed(tx: Transaction, target: Target, version: int, check_run_id: int | None) -> None:
    """GitHub shows ``version`` on check run ``check_run_id`` (None: given up on, the id
    kept as it was); the lease is given back."""
    tx.execute(_PUSHED, {"key": target.dedupe_key, "head": target.head_sha,
                         "version": version, "run_id": check_run_id})


def release(tx: Transaction, target: Target) -> None:
    """Give the push lease back without pushing (the next pass tries again)."""
    tx.execute(_RELEASE, {"key": target.dedupe_key, "head": target.head_sha})
