"""The ``repository_polls`` table: each repository's last poll, for the status page.

One row per repository: when the poller last polled it (``polled_at``), when a poll of it
last succeeded (``succeeded_at``) and, when the last one failed, why (``error``, GitHub's
words, cut short). Written by the poller once per cycle for every repository it polled, in
one transaction; read by ``GET /status``, from any process or host (the poller may run
elsewhere), and by the poller's schedule when it starts. It holds no review content.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = ["MAX_ERROR", "Poll", "latest", "record", "succeeded"]

MAX_ERROR: Final = 300

# ``succeeded_at`` is passed, not derived from ``:error`` in SQL: PostgreSQL cannot type a
# parameter that is only ever compared with NULL.
_RECORD = """
INSERT INTO repository_polls (repo, polled_at, succeeded_at, error)
VALUES (:repo, :at, :succeeded, :error)
ON CONFLICT (repo) DO UPDATE SET polled_at = excluded.polled_at,
  succeeded_at = COALESCE(excluded.succeeded_at, repository_polls.succeeded_at),
  error = excluded.error
"""
_LATEST = ("SELECT repo, polled_at, succeeded_at, error FROM repository_polls"
           " ORDER BY repo LIMIT ?")
_SUCCEEDED = "SELECT repo, succeeded_at FROM repository_polls WHERE succeeded_at IS NOT NULL"


@dataclass(frozen=True)
class Poll:
    """A repository's last poll."""

    repo: str
    polled_at: datetime
    succeeded_at: datetime | None
    error: str | None


def record(tx: Transaction, polls: Iterable[tuple[str, str | None]], at: datetime) -> None:
    """Record that each ``(repo, error)`` was polled at ``at`` (``error`` None: it worked)."""
    stamp = to_db_time(at)
    for repo, error in polls:
        tx.execute(_RECORD, {"repo": repo, "at": stamp,
                             "succeeded": stamp if error is None else None,
                             "error": None if error is None else error[:MAX_ERROR]})


def latest(tx: Transaction, limit: int = 500) -> list[Poll]:
    """Every repository's last poll (up to ``limit``), by name."""
    return [Poll(repo=str(r[0]), polled_at=from_db_time(str(r[1])),
                 succeeded_at=None if r[2] is None else from_db_time(str(r[2])),
                 error=None if r[3] is None else str(r[3]))
            for r in tx.execute(_LATEST, (limit,))]


def succeeded(tx: Transaction) -> dict[str, datetime]:
    """When a poll of each repository last succeeded (the poller's schedule after a
    restart)."""
    return {str(repo): from_db_time(str(at)) for repo, at in tx.execute(_SUCCEEDED)}
