"""The ``agent_comments`` table: every comment id the App itself posted (never pruned).

The trigger rules ask "is this comment ours?" so that the App never takes its own
words for a request; comment ids are global on GitHub, so the question needs no
repository (the ``agent_comments_id`` index answers it).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from service.storage.database import Database, Transaction
from service.storage.times import to_db_time

__all__ = ["AgentComments", "is_ours", "ours", "remember"]

_REMEMBER = """
INSERT INTO agent_comments (repo, comment_id, posted_at) VALUES (:repo, :comment_id, :now)
ON CONFLICT (repo, comment_id) DO NOTHING
"""
_OURS = "SELECT 1 FROM agent_comments WHERE comment_id = ? LIMIT 1"


def remember(tx: Transaction, repo: str, comment_ids: Iterable[int], now: datetime) -> None:
    """Record comment ids the App posted (idempotent)."""
    stamp = to_db_time(now)
    for comment_id in comment_ids:
        tx.execute(_REMEMBER, {"repo": repo, "comment_id": int(comment_id), "now": stamp})


def is_ours(tx: Transaction, comment_id: int) -> bool:
    """True when the App posted ``comment_id``."""
    return tx.execute(_OURS, (comment_id,)).fetchone() is not None


def ours(tx: Transaction, comment_ids: Iterable[int]) -> frozenset[int]:
    """Which of ``comment_ids`` the App posted (one statement for the lot)."""
    ids = sorted({int(c) for c in comment_ids})
    if not ids:
        return frozenset()
    marks = ", ".join("?" * len(ids))
    return frozenset(int(r[0]) for r in tx.execute(
        f"SELECT comment_id FROM agent_comments WHERE comment_id IN ({marks})", ids))


class AgentComments:
    """Is this comment id one the agent posted? A ``TriggerContext.agent_comments`` predicate.

    Inside a ``transaction()`` on the same thread, ``read()`` joins it, so the webhook's
    classification sees its own writes.
    """

    def __init__(self, db: Database) -> None:
        self._db = db

    def __call__(self, comment_id: int) -> bool:
        with self._db.read() as tx:
            return is_ours(tx, comment_id)
