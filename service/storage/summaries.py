"""The ``pr_summaries`` table: the one summary comment of the App's on each pull request.

One row per pull request: the comment's id once it exists, ``create_started_at`` stamped
before the first ``POST`` (a create whose answer was lost is found again by its marker, never
made twice), ``version`` counting the requests to bring it up to date and ``shown_version``
the one last written, and a short lease so one process edits it at a time — another that
asks meanwhile only bumps ``version``, and the holder writes again before it lets go.

``facts`` reads what the comment says from the tables that know it (the queue, the runs,
the ledger and ``posted_findings``); this module writes nothing but ``pr_summaries``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = ["Facts", "Head", "Lease", "creating", "facts", "finish", "lease", "pending",
           "release", "request"]

_REQUEST = """
INSERT INTO pr_summaries (repo, pr_number, version, shown_version, updated_at)
VALUES (:repo, :pr_number, 1, 0, :now)
ON CONFLICT (repo, pr_number) DO UPDATE SET version = pr_summaries.version + 1,
  updated_at = excluded.updated_at
"""
_TAKE = """
UPDATE pr_summaries SET lease_until = :until
 WHERE repo = :repo AND pr_number = :pr_number
   AND (lease_until IS NULL OR lease_until < :now)
"""
_ROW = ("SELECT comment_id, create_started_at, version, shown_version FROM pr_summaries"
        " WHERE repo = ? AND pr_number = ?")
_HEADS = """
SELECT q.kind, q.command, q.status, COALESCE(r.head_sha, q.head_sha), r.outcome,
       r.publish_outcome, l.stop_reason, q.enqueued_at, r.coverage
  FROM queue q
  LEFT JOIN runs r ON r.dedupe_key = q.dedupe_key
  LEFT JOIN ledger l ON l.id = (SELECT MAX(id) FROM ledger WHERE dedupe_key = q.dedupe_key)
 WHERE q.repo = ? AND q.pr_number = ?
 ORDER BY q.enqueued_at, q.dedupe_key
"""
_COST = """
SELECT COALESCE(SUM(CASE WHEN settled_at IS NOT NULL THEN used_tokens END), 0),
       SUM(CASE WHEN settled_at IS NOT NULL THEN cost_usd END),
       COUNT(settled_at),
       COALESCE(SUM(CASE WHEN settled_at IS NULL THEN reserved_tokens END), 0),
       COUNT(*) - COUNT(settled_at)
  FROM ledger WHERE repo = ? AND pr_number = ?
"""
_OPEN = ("SELECT severity, COUNT(*) FROM posted_findings"
         " WHERE repo = ? AND pr_number = ? AND state = 'open' GROUP BY severity")
_POSTED = ("SELECT head_sha, COUNT(*) FROM posted_findings"
           " WHERE repo = ? AND pr_number = ? GROUP BY head_sha")
_OVERVIEW = """
SELECT head_sha, assessment FROM runs
 WHERE repo = ? AND pr_number = ? AND assessment IS NOT NULL
   AND publish_outcome IN ('published', 'dry_run')
 ORDER BY recorded_at DESC, dedupe_key DESC LIMIT 1
"""
_PENDING = """
SELECT repo, pr_number FROM pr_summaries
 WHERE version > shown_version AND (lease_until IS NULL OR lease_until < :now)
 ORDER BY updated_at LIMIT :limit
"""


@dataclass(frozen=True)
class Lease:
    """The row as the lease holder found it."""

    comment_id: int | None
    create_started_at: datetime | None
    version: int
    shown_version: int


@dataclass(frozen=True)
class Head:
    """One trigger of the pull request and what became of it."""

    kind: str                  # pr_opened | mention
    command: str               # review | describe | ask
    status: str                # the queue row's
    head_sha: str | None
    outcome: str | None        # runs.outcome, when a run was recorded
    publish_outcome: str | None
    stop_reason: str | None    # the last ledger row's
    enqueued_at: datetime
    posted: int = 0            # findings first posted on this head (posted_findings)
    #: ``(read, of)`` files, when the run recorded its coverage.
    files: tuple[int, int] | None = None


@dataclass(frozen=True)
class Facts:
    """What the summary comment says."""

    heads: tuple[Head, ...]
    tokens: int                # settled: what the closed runs were charged
    cost_usd: float | None
    runs: int                  # closed runs (settled or lost)
    open_findings: tuple[tuple[str, int], ...]  # (severity, count), by name
    #: The latest published review's head and assessment (raw JSON; None once purged).
    overview: tuple[str, str] | None = None
    #: Runs in progress and the tokens their open reservations hold (not spent yet).
    in_progress: int = 0
    reserved: int = 0


def request(tx: Transaction, repo: str, pr_number: int, now: datetime) -> None:
    """Ask for the summary to be brought up to date."""
    tx.execute(_REQUEST, {"repo": repo, "pr_number": pr_number, "now": to_db_time(now)})


def lease(tx: Transaction, repo: str, pr_number: int, now: datetime,
          until: datetime) -> Lease | None:
    """Take the row's lease (None: another process holds it and will write again)."""
    taken = tx.execute(_TAKE, {"repo": repo, "pr_number": pr_number,
                               "now": to_db_time(now), "until": to_db_time(until)}).rowcount
    if taken != 1:
        return None
    comment_id, started, version, shown = tx.execute(_ROW, (repo, pr_number)).fetchone()
    return Lease(comment_id=None if comment_id is None else int(comment_id),
                 create_started_at=None if started is None else from_db_time(started),
                 version=int(version), shown_version=int(shown))


def creating(tx: Transaction, repo: str, pr_number: int, now: datetime) -> None:
    """Stamp that a create is about to be sent."""
    tx.execute("UPDATE pr_summaries SET create_started_at = ? WHERE repo = ? AND pr_number = ?",
               (to_db_time(now), repo, pr_number))


def finish(tx: Transaction, repo: str, pr_number: int, comment_id: int | None,
           version: int) -> int | None:
    """Record the comment written at ``version`` and let go of the lease — unless someone
    asked again meanwhile: then the lease is kept and the version now wanted returned.

    The release is one guarded ``UPDATE``, so a request that commits while it runs is
    either seen here (and written by this holder) or comes after the release (and its
    asker takes the lease itself): none is left unwritten.
    """
    tx.execute("UPDATE pr_summaries SET comment_id = ?, shown_version = ?"
               " WHERE repo = ? AND pr_number = ?", (comment_id, version, repo, pr_number))
    let_go = tx.execute("UPDATE pr_summaries SET lease_until = NULL WHERE repo = ?"
                        " AND pr_number = ? AND version <= shown_version",
                        (repo, pr_number)).rowcount
    if let_go == 1:
        return None
    return int(tx.execute(_ROW, (repo, pr_number)).fetchone()[2])


def release(tx: Transaction, repo: str, pr_number: int) -> None:
    """Let go of the lease without writing (the attempt failed; ``pending`` offers it
    again)."""
    tx.execute("UPDATE pr_summaries SET lease_until = NULL WHERE repo = ? AND pr_number = ?",
               (repo, pr_number))


def pending(tx: Transaction, now: datetime, limit: int) -> list[tuple[str, int]]:
    """Pull requests whose summary is behind what was asked and that nobody is writing."""
    rows = tx.execute(_PENDING, {"now": to_db_time(now), "limit": limit}).fetchall()
    return [(str(r[0]), int(r[1])) for r in rows]


def _files(coverage: object) -> tuple[int, int] | None:
    """``runs.coverage``'s ``(reviewed, files)``; None when absent or unreadable (the
    summary then says what it said before coverage was kept)."""
    try:
        data = json.loads(coverage) if isinstance(coverage, str) else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    read, of = data.get("reviewed"), data.get("files")
    return (read, of) if isinstance(read, int) and isinstance(of, int) else None


def facts(tx: Transaction, repo: str, pr_number: int) -> Facts:
    """What the pull request's summary says, read in one snapshot."""
    posted = {str(sha): int(n) for sha, n in tx.execute(_POSTED, (repo, pr_number))}
    seen: set[str] = set()
    heads: list[Head] = []
    for r in tx.execute(_HEADS, (repo, pr_number)).fetchall():
        sha = None if r[3] is None else str(r[3])
        # Findings are counted on the first head they were posted on, once.
        count = 0
        if sha is not None and r[5] in ("published", "dry_run") and sha not in seen:
            count = posted.get(sha, 0)
            seen.add(sha)
        heads.append(Head(kind=str(r[0]), command=str(r[1]), status=str(r[2]), head_sha=sha,
                          outcome=r[4], publish_outcome=r[5], stop_reason=r[6],
                          enqueued_at=from_db_time(r[7]), posted=count,
                          files=_files(r[8])))
    tokens, cost, runs, reserved, in_progress = tx.execute(_COST, (repo, pr_number)).fetchone()
    found = sorted((str(s), int(n)) for s, n in tx.execute(_OPEN, (repo, pr_number)))
    latest = tx.execute(_OVERVIEW, (repo, pr_number)).fetchone()
    return Facts(heads=tuple(heads), tokens=int(tokens), runs=int(runs),
                 cost_usd=None if cost is None else float(cost), open_findings=tuple(found),
                 overview=None if latest is None else (str(latest[0]), str(latest[1])),
                 in_progress=int(in_progress), reserved=int(reserved))
