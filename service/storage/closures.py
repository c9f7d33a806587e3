"""The ``closed_pull_requests`` table: pull requests seen closing, by webhook or by poll.

Read by the retention sweep (whose content to purge, and when) and written by the one
ingest seam both paths share. A reopened and closed-again pull request records the new
``closed_at`` and is due for purging again.
"""

from __future__ import annotations

from datetime import datetime

from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = ["closed_at", "record_close", "stamp_purged"]

_RECORD_CLOSE = """
INSERT INTO closed_pull_requests (repo, pr_number, merged, closed_at)
VALUES (:repo, :pr_number, :merged, :closed_at)
ON CONFLICT (repo, pr_number) DO UPDATE SET
    merged = excluded.merged, closed_at = excluded.closed_at, purged_at = NULL
"""
_CLOSED_AT = "SELECT closed_at FROM closed_pull_requests WHERE repo = ? AND pr_number = ?"
_STAMP = """
UPDATE closed_pull_requests SET purged_at = :now
 WHERE purged_at IS NULL AND closed_at <= :cutoff
"""


def record_close(tx: Transaction, repo: str, pr_number: int, *, merged: bool,
                 at: datetime) -> None:
    """``repo#pr_number`` closed (``merged`` or not) at ``at``."""
    tx.execute(_RECORD_CLOSE, {"repo": repo, "pr_number": pr_number, "merged": int(merged),
                               "closed_at": to_db_time(at)})


def stamp_purged(tx: Transaction, *, now: datetime, cutoff: datetime) -> int:
    """Mark every pull request closed at or before ``cutoff`` as purged; how many."""
    return tx.execute(_STAMP, {"now": to_db_time(now),
                               "cutoff": to_db_time(cutoff)}).rowcount


def closed_at(tx: Transaction, repo: str, pr_number: int) -> datetime | None:
    """When ``repo#pr_number`` was last seen closing, or None (never, as far as we know)."""
    row = tx.execute(_CLOSED_AT, (repo, pr_number)).fetchone()
    return None if row is None else from_db_time(str(row[0]))
