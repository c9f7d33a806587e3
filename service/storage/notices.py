"""The ``notices`` table: at most one notice per trigger (the primary key is the rule).

A notice tells the person who asked why their request has not run (the budget refused
it, the change was too large for one run, or every attempt failed). The row is written
*before* the post (``claim``), so two passes cannot both post; a post that failed for now
drops the row again (``unclaim``) so the next pass retries; a posted one records its
comment id.
The two candidate queries read the queue, ledger and runs beside it, but only to find
which triggers may be owed a notice: this module writes nothing but ``notices``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from service.storage.database import Transaction
from service.storage.queue import ABANDONED, PENDING
from service.storage.times import to_db_time

__all__ = ["Candidate", "abandoned_mentions", "claim", "pending_mentions", "posted",
           "preflight_refusals", "unclaim"]

_PENDING_MENTIONS = f"""
SELECT q.dedupe_key, q.repo, q.pr_number, q.comment_id, q.comment_source, q.command
  FROM queue q
 WHERE q.status = '{PENDING}' AND q.kind = 'mention'
   AND NOT EXISTS (SELECT 1 FROM notices n WHERE n.dedupe_key = q.dedupe_key)
 ORDER BY q.enqueued_at, q.dedupe_key LIMIT :limit
"""

# Off the ledger_window index: recent rows settled at zero as refused, of a mention, that
# recorded no run (a run means the engine ran and the publisher answers it). A question is
# never refused before its run (its refusals are recorded runs the publisher answers);
# one settled so is one whose comment was deleted, and there is nobody left to tell.
_PREFLIGHT = """
SELECT q.dedupe_key, q.repo, q.pr_number, q.comment_id, q.comment_source, q.command
  FROM ledger l JOIN queue q ON q.dedupe_key = l.dedupe_key
 WHERE l.reserved_at >= :since AND l.stop_reason = 'refused' AND l.used_tokens = 0
   AND q.kind = 'mention' AND q.command <> 'ask'
   AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.dedupe_key = l.dedupe_key)
   AND NOT EXISTS (SELECT 1 FROM notices n WHERE n.dedupe_key = l.dedupe_key)
 ORDER BY l.reserved_at LIMIT :limit
"""

# Mentions every attempt of which failed (engine unavailable, infrastructure), with the
# last attempt's stop reason.
_ABANDONED = f"""
SELECT q.dedupe_key, q.repo, q.pr_number, q.comment_id, q.comment_source, q.command,
       (SELECT l.stop_reason FROM ledger l WHERE l.dedupe_key = q.dedupe_key
         AND l.settled_at IS NOT NULL ORDER BY l.id DESC LIMIT 1)
  FROM queue q
 WHERE q.status = '{ABANDONED}' AND q.kind = 'mention' AND q.enqueued_at >= :since
   AND NOT EXISTS (SELECT 1 FROM notices n WHERE n.dedupe_key = q.dedupe_key)
 ORDER BY q.enqueued_at, q.dedupe_key LIMIT :limit
"""

_CLAIM = """
INSERT INTO notices (dedupe_key, kind, comment_id, posted_at) VALUES (:key, :kind, NULL, :now)
ON CONFLICT (dedupe_key) DO NOTHING
"""
_POSTED = "UPDATE notices SET comment_id = :comment_id, posted_at = :now WHERE dedupe_key = :key"
_UNCLAIM = "DELETE FROM notices WHERE dedupe_key = :key AND comment_id IS NULL"


@dataclass(frozen=True)
class Candidate:
    """A mention that may be owed a notice."""

    dedupe_key: str
    repo: str
    pr_number: int
    comment_id: int | None
    comment_source: str | None
    command: str
    stop_reason: str | None = None  # an abandoned one's last attempt


def pending_mentions(tx: Transaction, limit: int) -> list[Candidate]:
    """Pending mentions that have had no notice, oldest first."""
    return [Candidate(*row) for row in tx.execute(_PENDING_MENTIONS, {"limit": limit})]


def preflight_refusals(tx: Transaction, since: datetime, limit: int) -> list[Candidate]:
    """Mentions the worker refused before running them (since ``since``), with no notice."""
    return [Candidate(*row) for row in tx.execute(_PREFLIGHT, {"since": to_db_time(since),
                                                               "limit": limit})]


def abandoned_mentions(tx: Transaction, since: datetime, limit: int) -> list[Candidate]:
    """Mentions enqueued since ``since`` that used every attempt, with no notice."""
    return [Candidate(*row) for row in tx.execute(_ABANDONED, {"since": to_db_time(since),
                                                               "limit": limit})]


def claim(tx: Transaction, key: str, kind: str, now: datetime) -> bool:
    """Take the right to post ``key``'s notice; False when it was taken already."""
    return tx.execute(_CLAIM, {"key": key, "kind": kind, "now": to_db_time(now)}).rowcount > 0


def posted(tx: Transaction, key: str, comment_id: int, now: datetime) -> None:
    """The notice went up as ``comment_id``."""
    tx.execute(_POSTED, {"key": key, "comment_id": comment_id, "now": to_db_time(now)})


def unclaim(tx: Transaction, key: str) -> bool:
    """Give the right back (the post failed for now); False when it was posted."""
    return tx.execute(_UNCLAIM, {"key": key}).rowcount > 0
