"""The ``runs`` table: what a paid review or description produced, and its publication.

A run is inserted by the transaction that settles its ledger row and finishes its queue
row (``service.review.settle``), so a run is recorded exactly when its cost is. The
publisher then takes it through its publication lifecycle, ``TRANSITIONS`` below, the
only place that lifecycle is written down; each write takes its ``WHERE`` from it:

- ``recorded``: waiting to be published (no outcome, no failure stamp, no live lease);
- ``leased``: one attempt holds the publication lease (``publish_lease_until`` in the
  future), so two workers or processes never publish one run at once; a crashed
  attempt's lease lapses and the run is ``recorded`` again;
- ``published`` | ``superseded`` | ``dry_run`` | ``refused``: how publication ended;
- ``failed``: given up on (``publish_failed_at``; clearing it offers the run again).

Separately, its content (findings, assessment, description, omitted) is ``held`` until
the retention sweep ``purge``s it; a purged run is never offered for publication. The
content's JSON forms are ``service.publish.run_content``'s; here they are text.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from service.storage.database import Transaction
from service.storage.lifecycle import Lifecycle
from service.storage.times import to_db_time

__all__ = [
    "CONCLUSIONS",
    "CONTENT_TRANSITIONS",
    "DRY_RUN",
    "FAILED",
    "HELD",
    "LEASED",
    "OPERATOR_EVENTS",
    "PUBLISHED",
    "PURGED",
    "RECORDED",
    "REFUSED",
    "STATES",
    "SUPERSEDED",
    "TRANSITIONS",
    "RunRow",
    "conclude",
    "count_attempt",
    "fail",
    "insert",
    "inspect",
    "last_completed_head",
    "lease",
    "listing",
    "pending",
    "purge_closed",
    "release",
    "renew",
    "republish",
    "state",
    "stored",
]

# --- the publication lifecycle ---------------------------------------------------------

RECORDED: Final = "recorded"
LEASED: Final = "leased"
PUBLISHED: Final = "published"
SUPERSEDED: Final = "superseded"
DRY_RUN: Final = "dry_run"
REFUSED: Final = "refused"
FAILED: Final = "failed"
STATES: Final = (RECORDED, LEASED, PUBLISHED, SUPERSEDED, DRY_RUN, REFUSED, FAILED)
#: The outcomes ``conclude`` records (``publish_outcome`` values), by event name.
CONCLUSIONS: Final = {"publish": PUBLISHED, "supersede": SUPERSEDED, "dry_run": DRY_RUN,
                      "refuse": REFUSED}

_UNDECIDED: Final = (RECORDED, LEASED, FAILED)

#: (event, from-state) -> to-state. An attempt ``lease``s a recorded run, ``renew``s its
#: live lease while it works, and ends with a conclusion, ``fail`` (giving up) or
#: ``release`` (to be retried). A conclusion or a failure stamp may also be written for a
#: run whose lease lapsed (the attempt finished late) or that failed before: the first
#: outcome written stands.
LIFECYCLE: Final = Lifecycle("runs", STATES, {
    ("lease", RECORDED): LEASED,
    ("renew", LEASED): LEASED,
    ("release", LEASED): RECORDED,
    ("release", RECORDED): RECORDED,
    **{(event, state): outcome for event, outcome in CONCLUSIONS.items()
       for state in _UNDECIDED},
    **{("fail", state): FAILED for state in _UNDECIDED},
    # An operator's ``pr-review-agent runs republish``: a run given up on (after its cause
    # was fixed) or recorded in a dry run, offered to the publisher again.
    ("republish", FAILED): RECORDED,
    ("republish", DRY_RUN): RECORDED,
})
TRANSITIONS: Final = LIFECYCLE.transitions
#: Events only an operator performs: the one way back from a conclusion (a dry run's).
OPERATOR_EVENTS: Final = frozenset({"republish"})

HELD: Final = "held"
PURGED: Final = "purged"
#: The content's own lifecycle: held until the retention sweep purges it.
CONTENT: Final = Lifecycle("runs content", (HELD, PURGED), {("purge", HELD): PURGED})
CONTENT_TRANSITIONS: Final = CONTENT.transitions

# Each state as the columns hold it (``:now`` tells a live lease from a lapsed one).
_STATE_SQL: Final = {
    RECORDED: ("(publish_outcome IS NULL AND publish_failed_at IS NULL"
               " AND (publish_lease_until IS NULL OR publish_lease_until <= :now))"),
    LEASED: ("(publish_outcome IS NULL AND publish_failed_at IS NULL"
             " AND publish_lease_until > :now)"),
    FAILED: "(publish_outcome IS NULL AND publish_failed_at IS NOT NULL)",
    **{state: f"(publish_outcome = '{state}')" for state in CONCLUSIONS.values()},
}
_CONTENT_SQL: Final = {HELD: "content_purged_at IS NULL",
                       PURGED: "content_purged_at IS NOT NULL"}


def _from(event: str) -> str:
    """The ``WHERE`` fragment: the row is in a state ``event`` may leave."""
    sources = LIFECYCLE.sources(event)
    if set(sources) == {RECORDED, LEASED, FAILED}:
        return "publish_outcome IS NULL"  # the three undecided states, said plainly
    if set(sources) == {RECORDED, LEASED}:
        return "(publish_outcome IS NULL AND publish_failed_at IS NULL)"
    return "(" + " OR ".join(_STATE_SQL[s] for s in sources) + ")"


_INSERT = """
INSERT INTO runs (dedupe_key, repo, pr_number, head_sha, outcome, findings, recorded_at,
                  omitted, assessment, description, fixed, coverage, answer)
VALUES (:dedupe_key, :repo, :pr_number, :head_sha, :outcome, :findings, :recorded_at,
        :omitted, :assessment, :description, :fixed, :coverage, :answer)
"""

# The head of the last review that saw everything: a description or an answer is not a
# review, and a truncated or failed one left something unread, so neither can be the start
# of an incremental round. Two runs of one pull request recorded in the same microsecond (a
# frozen clock in a test; never two workers, one pull request is leased to one at a time)
# are told apart by their keys, the same way on every backend.
_LAST_COMPLETED_HEAD = """
SELECT head_sha FROM runs
 WHERE repo = :repo AND pr_number = :pr_number AND outcome = 'completed'
   AND description IS NULL AND answer IS NULL
 ORDER BY recorded_at DESC, dedupe_key DESC LIMIT 1
"""

_LEASE = f"""
UPDATE runs SET publish_attempts = publish_attempts + 1, publish_lease_until = :until
 WHERE dedupe_key = :key AND {_STATE_SQL[RECORDED]} AND {_CONTENT_SQL[HELD]}
"""
_RENEW = f"""
UPDATE runs SET publish_lease_until = :until WHERE dedupe_key = :key AND {_from("renew")}
"""
_RELEASE = f"""
UPDATE runs SET publish_lease_until = NULL WHERE dedupe_key = :key AND {_from("release")}
"""
_CONCLUDE = f"""
UPDATE runs SET publish_outcome = :outcome, published_at = :published_at,
                comment_id = :comment_id, publish_lease_until = NULL
 WHERE dedupe_key = :key AND {_from("publish")}
"""
_FAIL = f"""
UPDATE runs SET publish_failed_at = :now, publish_lease_until = NULL
 WHERE dedupe_key = :key AND {_from("fail")}
"""
_REPUBLISH = f"""
UPDATE runs SET publish_outcome = NULL, published_at = NULL, publish_failed_at = NULL,
                publish_attempts = 0, publish_lease_until = NULL
 WHERE dedupe_key = :key AND content_purged_at IS NULL AND {_from("republish")}
"""
_LISTING_COLUMNS: Final = ("dedupe_key", "repo", "pr_number", "head_sha", "outcome",
                           "publish_outcome", "comment_id", "recorded_at", "published_at",
                           "publish_failed_at", "publish_attempts", "content_purged_at")
# What the run was, for a listing: an automatic review (pr_opened), or what a comment
# asked for (review, describe, ask), as its queue row says.
_KIND = ("(SELECT CASE WHEN q.kind = 'mention' THEN q.command ELSE q.kind END FROM queue q"
         " WHERE q.dedupe_key = runs.dedupe_key)")
_COUNT_ATTEMPT = "UPDATE runs SET publish_attempts = publish_attempts + 1 WHERE dedupe_key = :key"
_STORED = "SELECT * FROM runs WHERE dedupe_key = :key"
# Off the runs_unpublished partial index.
_PENDING = f"""
SELECT dedupe_key FROM runs
 WHERE {_STATE_SQL[RECORDED]} AND {_CONTENT_SQL[HELD]}
 ORDER BY recorded_at, dedupe_key LIMIT :limit
"""
# Every run of a pull request closed at or before the cutoff: those recorded by the
# close, or reserved (started) by it (the ledger says when).
_PURGE_CLOSED = f"""
UPDATE runs
   SET findings = '[]', omitted = '[]', assessment = NULL,
       description = CASE WHEN description IS NULL THEN NULL ELSE '{{}}' END,
       answer = CASE WHEN answer IS NULL THEN NULL ELSE '{{}}' END,
       content_purged_at = :now
 WHERE {_CONTENT_SQL[HELD]}
   AND EXISTS (
       SELECT 1 FROM closed_pull_requests c
        WHERE c.repo = runs.repo AND c.pr_number = runs.pr_number AND c.closed_at <= :cutoff
          AND (runs.recorded_at <= c.closed_at
               OR EXISTS (SELECT 1 FROM ledger l
                           WHERE l.repo = runs.repo AND l.pr_number = runs.pr_number
                             AND l.dedupe_key = runs.dedupe_key
                             AND l.reserved_at <= c.closed_at)))
"""
_INSPECT = """
SELECT outcome, findings, publish_outcome, comment_id, publish_failed_at
  FROM runs WHERE dedupe_key = :key
"""
_INSPECT_COLUMNS: Final = ("outcome", "findings", "publish_outcome", "comment_id",
                           "publish_failed_at")


@dataclass(frozen=True)
class RunRow:
    """A run as inserted; the content columns already in their JSON text form."""

    dedupe_key: str
    repo: str
    pr_number: int
    head_sha: str
    outcome: str
    findings: str
    recorded_at: datetime
    omitted: str
    assessment: str | None
    description: str | None
    fixed: str | None = None  # JSON: [{"fingerprint", "thread_id"}], the threads to resolve
    coverage: str | None = None  # JSON: {"files", "reviewed", "parts", "pruned"}
    answer: str | None = None  # JSON: {"text", "question", "reply_to"}, for an ask


def insert(tx: Transaction, run: RunRow) -> None:
    """Insert ``run``. A second run for one dedupe key is an integrity error on purpose:
    the queue row is finished in the same transaction, so it can only mean the lifecycle
    was broken."""
    tx.execute(_INSERT, {
        "dedupe_key": run.dedupe_key, "repo": run.repo, "pr_number": run.pr_number,
        "head_sha": run.head_sha, "outcome": run.outcome, "findings": run.findings,
        "recorded_at": to_db_time(run.recorded_at), "omitted": run.omitted,
        "assessment": run.assessment, "description": run.description, "fixed": run.fixed,
        "coverage": run.coverage, "answer": run.answer,
    })


def last_completed_head(tx: Transaction, repo: str, pr_number: int) -> str | None:
    """The head sha of the last completed review of this pull request, if any."""
    row = tx.execute(_LAST_COMPLETED_HEAD, {"repo": repo, "pr_number": pr_number}).fetchone()
    return None if row is None else str(row[0])


def lease(tx: Transaction, key: str, now: datetime, until: datetime) -> bool:
    """Take the publication lease of a recorded run whose content is held, counting the
    attempt; False when there is nothing to take."""
    return tx.execute(_LEASE, {"key": key, "now": to_db_time(now),
                               "until": to_db_time(until)}).rowcount == 1


def renew(tx: Transaction, key: str, now: datetime, until: datetime) -> bool:
    """Extend a live lease to ``until``; False when it lapsed (it may be another's now)."""
    return tx.execute(_RENEW, {"key": key, "now": to_db_time(now),
                               "until": to_db_time(until)}).rowcount == 1


def release(tx: Transaction, key: str) -> None:
    """Drop the lease, so the run can be retried."""
    tx.execute(_RELEASE, {"key": key})


def conclude(tx: Transaction, key: str, *, outcome: str, published_at: datetime | None,
             comment_id: int | None) -> bool:
    """Record how publication ended; False when an outcome was recorded already."""
    if outcome not in CONCLUSIONS.values():
        raise ValueError(f"publish outcome must be one of {tuple(CONCLUSIONS.values())}, "
                         f"got {outcome!r}")
    return tx.execute(_CONCLUDE, {
        "key": key, "outcome": outcome, "comment_id": comment_id,
        "published_at": None if published_at is None else to_db_time(published_at),
    }).rowcount == 1


def fail(tx: Transaction, key: str, now: datetime) -> None:
    """Give up on publishing ``key``: it is offered no more."""
    tx.execute(_FAIL, {"key": key, "now": to_db_time(now)})


def count_attempt(tx: Transaction, key: str) -> None:
    """One more try within an attempt (the 422 fallback's second post)."""
    tx.execute(_COUNT_ATTEMPT, {"key": key})


def stored(tx: Transaction, key: str) -> dict[str, Any] | None:
    """Every column of ``key``'s run, by name, or None when there is no such run."""
    cursor = tx.execute(_STORED, {"key": key})
    row = cursor.fetchone()
    if row is None:
        return None
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


def pending(tx: Transaction, now: datetime, limit: int) -> list[str]:
    """Keys of recorded runs whose content is held, oldest first."""
    return [str(key) for (key,) in tx.execute(_PENDING, {"now": to_db_time(now),
                                                         "limit": limit})]


def purge_closed(tx: Transaction, *, now: datetime, cutoff: datetime) -> int:
    """Purge the content of every run of a pull request closed at or before ``cutoff``;
    how many runs were purged."""
    return tx.execute(_PURGE_CLOSED, {"now": to_db_time(now),
                                      "cutoff": to_db_time(cutoff)}).rowcount


_STATE = ("SELECT " + ", ".join(f"CASE WHEN {_STATE_SQL[s]} THEN 1 ELSE 0 END" for s in STATES)
          + f", CASE WHEN {_CONTENT_SQL[PURGED]} THEN 1 ELSE 0 END"
          + " FROM runs WHERE dedupe_key = :key")


def state(tx: Transaction, key: str, now: datetime) -> tuple[str, str] | None:
    """``(publication state, content state)`` of ``key``'s run at ``now``, or None.

    Read through the same predicates the writes use; a row that matches no state, or
    more than one, is a ``RuntimeError`` (the columns were edited into a contradiction).
    """
    row = tx.execute(_STATE, {"key": key, "now": to_db_time(now)}).fetchone()
    if row is None:
        return None
    matched = [s for s, hit in zip(STATES, row, strict=False) if hit]
    if len(matched) != 1:
        raise RuntimeError(f"run {key} is in {len(matched)} publication states: {matched}")
    return matched[0], PURGED if row[-1] else HELD


def inspect(tx: Transaction, key: str) -> dict[str, Any] | None:
    """What an operator's report shows of ``key``'s run."""
    row = tx.execute(_INSPECT, {"key": key}).fetchone()
    return None if row is None else dict(zip(_INSPECT_COLUMNS, row, strict=True))


def republish(tx: Transaction, key: str) -> bool:
    """Offer a failed or dry-run run to the publisher again (attempts reset); False when
    ``key`` is no such run, or its content was purged."""
    return tx.execute(_REPUBLISH, {"key": key}).rowcount == 1


def listing(tx: Transaction, *, repo: str | None = None, failed: bool = False,
            limit: int = 50) -> list[dict[str, Any]]:
    """The newest ``limit`` runs (of ``repo``; only those given up on with ``failed``),
    newest first, without their content."""
    where: list[str] = []
    params: list[object] = []
    if repo is not None:
        where.append("repo = ?")
        params.append(repo)
    if failed:
        where.append(_STATE_SQL[FAILED])
    sql = (f"SELECT {', '.join(_LISTING_COLUMNS)}, {_KIND} FROM runs"
           + (" WHERE " + " AND ".join(where) if where else "")
           + " ORDER BY recorded_at DESC, dedupe_key DESC LIMIT ?")
    return [dict(zip((*_LISTING_COLUMNS, "kind"), row, strict=True))
            for row in tx.execute(sql, (*params, limit))]
