"""The ``repositories`` table: which repositories the App is installed on, and by whom.

Written by both ways the App learns of installations (the webhook's ``installation``
deliveries, the poller's discovery); read by the worker to find the installation whose
token reads a repository. A removed repository keeps its row with ``removed_at`` set, so
that adding it back later starts a fresh ``added_at``.
"""

from __future__ import annotations

from datetime import datetime

from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = ["add", "added_at", "drop", "drop_installation", "installation_of", "live", "remove"]

_ADD = """
INSERT INTO repositories (repo, installation_id, added_at, removed_at)
VALUES (:repo, :installation_id, :now, NULL)
ON CONFLICT (repo) DO UPDATE SET
    installation_id = excluded.installation_id,
    added_at = CASE WHEN repositories.removed_at IS NULL THEN repositories.added_at
                    ELSE excluded.added_at END,
    removed_at = NULL
"""
# Matching the installation keeps a late "removed" from an old installation from dropping
# a repository that has since moved to another one.
_DROP = """
UPDATE repositories SET removed_at = :now
 WHERE repo = :repo AND installation_id = :installation_id AND removed_at IS NULL
"""
_DROP_INSTALLATION = """
UPDATE repositories SET removed_at = :now
 WHERE installation_id = :installation_id AND removed_at IS NULL
RETURNING repo
"""
_REMOVE = "UPDATE repositories SET removed_at = :now WHERE repo = :repo"
_LIVE = "SELECT repo, installation_id FROM repositories WHERE removed_at IS NULL"
_ADDED_AT = "SELECT added_at FROM repositories WHERE repo = :repo AND removed_at IS NULL"
_INSTALLATION_OF = """
SELECT installation_id FROM repositories WHERE repo = :repo AND removed_at IS NULL
"""


def add(tx: Transaction, repo: str, installation_id: int, now: datetime) -> None:
    """``repo`` is installed under ``installation_id`` (again, or still)."""
    tx.execute(_ADD, {"repo": repo, "installation_id": installation_id,
                      "now": to_db_time(now)})


def drop(tx: Transaction, repo: str, installation_id: int, now: datetime) -> None:
    """``installation_id`` no longer has ``repo`` (no change if another installation has)."""
    tx.execute(_DROP, {"repo": repo, "installation_id": installation_id,
                       "now": to_db_time(now)})


def drop_installation(tx: Transaction, installation_id: int, now: datetime) -> list[str]:
    """Every live repository of ``installation_id`` is removed; their names."""
    return [str(r[0]) for r in tx.execute(_DROP_INSTALLATION, {
        "installation_id": installation_id, "now": to_db_time(now)})]


def remove(tx: Transaction, repo: str, now: datetime) -> None:
    """``repo`` is no longer installed, whoever had it."""
    tx.execute(_REMOVE, {"repo": repo, "now": to_db_time(now)})


def live(tx: Transaction) -> dict[str, int]:
    """Every repository installed now, and its installation."""
    return {str(repo): int(inst) for repo, inst in tx.execute(_LIVE)}


def installation_of(tx: Transaction, repo: str) -> int | None:
    """The installation ``repo`` is installed under, or None when it is not (known)."""
    row = tx.execute(_INSTALLATION_OF, {"repo": repo}).fetchone()
    return None if row is None else int(row[0])


def added_at(tx: Transaction, repo: str) -> datetime | None:
    """When ``repo`` was (last) installed, or None when it is not (known)."""
    row = tx.execute(_ADDED_AT, {"repo": repo}).fetchone()
    return None if row is None else from_db_time(str(row[0]))
