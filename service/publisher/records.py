"""The publisher's reads and writes of the store: each function runs in the caller's
transaction (``conn``), and each caller keeps that transaction short — never across a
GitHub call.

A publication attempt starts by **taking the run's lease** (``claim``): one UPDATE that
counts the attempt (``publish_attempts``) and sets ``publish_lease_until``, and only when
the run still has no outcome, no failure stamp, no purged content, and no live lease. Two
workers, or a worker and the re-offer loop, or two processes on one store, therefore never
publish one run at the same time; a crashed attempt's lease lapses and the run is offered
again. It ends with ``record_outcome`` or ``record_failure`` (which clear the lease), or
with ``release`` when it will be retried.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from service.publisher.publication import Publication, build
from service.store import to_db_time

#: publish_outcome values.
OUTCOMES: Final = ("published", "superseded", "dry_run", "refused")

_CLAIM = """
UPDATE runs SET publish_attempts = publish_attempts + 1, publish_lease_until = :until
 WHERE dedupe_key = :key AND publish_outcome IS NULL AND publish_failed_at IS NULL
   AND content_purged_at IS NULL
   AND (publish_lease_until IS NULL OR publish_lease_until <= :now)
"""

_RUN = "SELECT * FROM runs WHERE dedupe_key = :key"
_QUEUE = ("SELECT kind, command, comment_id, comment_source FROM queue"
          " WHERE dedupe_key = :key")
# Off the ledger_pull_request index (repo, pr_number, reserved_at): the settled row of the
# attempt that recorded the run is the newest one of its key.
_LEDGER = """
SELECT used_tokens, reserved_tokens, usage_confidence, engine, model, mode, stop_reason,
       reviewed_since
  FROM ledger
 WHERE repo = :repo AND pr_number = :pr_number AND dedupe_key = :key
   AND settled_at IS NOT NULL
 ORDER BY id DESC LIMIT 1
"""

_COUNT_ATTEMPT = "UPDATE runs SET publish_attempts = publish_attempts + 1 WHERE dedupe_key = :key"

_OUTCOME = """
UPDATE runs SET publish_outcome = :outcome, published_at = :published_at,
                comment_id = :comment_id, publish_lease_until = NULL
 WHERE dedupe_key = :key AND publish_outcome IS NULL
"""

_FAILURE = """
UPDATE runs SET publish_failed_at = :now, publish_lease_until = NULL
 WHERE dedupe_key = :key AND publish_outcome IS NULL
"""

_RELEASE = "UPDATE runs SET publish_lease_until = NULL WHERE dedupe_key = :key"

# Only a lease still held is extended: one that lapsed may be another attempt's by now.
_RENEW = """
UPDATE runs SET publish_lease_until = :until
 WHERE dedupe_key = :key AND publish_outcome IS NULL AND publish_lease_until > :now
"""

_AGENT_COMMENT = """
INSERT INTO agent_comments (repo, comment_id, posted_at) VALUES (:repo, :comment_id, :now)
ON CONFLICT (repo, comment_id) DO NOTHING
"""

# Off the runs_unpublished partial index.
_PENDING = """
SELECT dedupe_key FROM runs
 WHERE publish_outcome IS NULL AND publish_failed_at IS NULL AND content_purged_at IS NULL
   AND (publish_lease_until IS NULL OR publish_lease_until <= :now)
 ORDER BY recorded_at, dedupe_key LIMIT :limit
"""


def _row(cursor: sqlite3.Cursor) -> dict[str, Any] | None:
    row = cursor.fetchone()
    if row is None:
        return None
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


def claim(conn: sqlite3.Connection, key: str, now: datetime,
          until: datetime) -> Publication | None:
    """Take the run's publication lease and count the attempt; the run to publish, or
    None when there is nothing to do (no such run, already decided, purged, or another
    attempt holds the lease). Raises ValueError when the stored content is malformed (the
    transaction then rolls back; the caller stamps the run as failed)."""
    taken = conn.execute(_CLAIM, {"key": key, "now": to_db_time(now),
                                  "until": to_db_time(until)}).rowcount
    if taken != 1:
        return None
    return load(conn, key)


def load(conn: sqlite3.Connection, key: str) -> Publication | None:
    """The publication of ``key`` as stored, or None when there is no such run."""
    run = _row(conn.execute(_RUN, {"key": key}))
    if run is None:
        return None
    queue = _row(conn.execute(_QUEUE, {"key": key}))
    ledger = _row(conn.execute(_LEDGER, {"key": key, "repo": run["repo"],
                                         "pr_number": run["pr_number"]}))
    return build(run, queue, ledger)


def count_attempt(conn: sqlite3.Connection, key: str) -> None:
    """One more try within an attempt (the 422 fallback's second post)."""
    conn.execute(_COUNT_ATTEMPT, {"key": key})


def record_outcome(conn: sqlite3.Connection, *, key: str, repo: str, outcome: str,
                   now: datetime, published: bool, comment_id: int | None,
                   posted: Iterable[int] = ()) -> bool:
    """How publication ended; ``posted`` are ids of comments the App wrote (they go into
    ``agent_comments``, so the trigger rules never take them for a request). False when
    an outcome was already recorded (nothing is changed then)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"publish outcome must be one of {OUTCOMES}, got {outcome!r}")
    stamp = to_db_time(now)
    changed = conn.execute(_OUTCOME, {
        "key": key, "outcome": outcome, "comment_id": comment_id,
        "published_at": stamp if published else None}).rowcount
    remember(conn, repo, posted, now)
    return changed == 1


def record_failure(conn: sqlite3.Connection, key: str, now: datetime) -> None:
    """Give up on publishing ``key``: ``publish_failed_at`` is stamped and the run is
    offered no more (clearing the stamp offers it again)."""
    conn.execute(_FAILURE, {"key": key, "now": to_db_time(now)})


def renew(conn: sqlite3.Connection, key: str, now: datetime, until: datetime) -> bool:
    """Extend a live publication lease to ``until``; False when it is no longer live."""
    return conn.execute(_RENEW, {"key": key, "now": to_db_time(now),
                                 "until": to_db_time(until)}).rowcount == 1


def release(conn: sqlite3.Connection, key: str) -> None:
    """Drop the lease so the run can be retried."""
    conn.execute(_RELEASE, {"key": key})


def remember(conn: sqlite3.Connection, repo: str, comment_ids: Iterable[int],
             now: datetime) -> None:
    """Record comment ids the App posted in ``agent_comments`` (idempotent)."""
    stamp = to_db_time(now)
    for comment_id in comment_ids:
        conn.execute(_AGENT_COMMENT, {"repo": repo, "comment_id": int(comment_id),
                                      "now": stamp})


def pending(conn: sqlite3.Connection, now: datetime, limit: int) -> list[str]:
    """Keys of runs still to publish (no outcome, no failure stamp, content held, no live
    lease), oldest first."""
    return [str(key) for (key,) in conn.execute(_PENDING, {"now": to_db_time(now),
                                                           "limit": limit})]
