"""The ``budget_state`` and ``budget_policy`` tables: the budget's shared scalars.

``budget_state`` is a key/value table (the circuit breaker's calibration and trips, as
text the breaker encodes); ``budget_policy`` holds the one shared policy row (``id = 1``).
What the values mean is ``service.budget``'s business; this module only stores them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from service.storage.database import Transaction
from service.storage.times import to_db_time

__all__ = ["PolicyRow", "delete_state", "publish_policy", "read_policy", "read_state",
           "write_state"]

_WRITE_STATE = ("INSERT INTO budget_state (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value")
_READ_POLICY = "SELECT authority_repo, policy, written_at FROM budget_policy WHERE id = 1"
_INSERT_POLICY = ("INSERT INTO budget_policy (id, authority_repo, policy, written_at)"
                  " VALUES (1, :authority, :policy, :written_at)")
_PUBLISH_IF_ABSENT = _INSERT_POLICY + " ON CONFLICT (id) DO NOTHING"
_REPLACE_POLICY = _INSERT_POLICY + (
    " ON CONFLICT (id) DO UPDATE SET authority_repo = excluded.authority_repo,"
    " policy = excluded.policy, written_at = excluded.written_at")


@functools.lru_cache(maxsize=8)
def _marks(count: int) -> str:
    return "(" + ", ".join("?" * count) + ")"


def read_state(tx: Transaction, keys: Sequence[str]) -> dict[str, str]:
    """The stored value of each of ``keys`` that has one."""
    rows = tx.execute(f"SELECT key, value FROM budget_state WHERE key IN {_marks(len(keys))}",
                      tuple(keys))
    return {str(k): str(v) for k, v in rows}


def write_state(tx: Transaction, values: Iterable[tuple[str, str]]) -> None:
    """Store each ``(key, value)``, replacing what was there."""
    tx.executemany(_WRITE_STATE, list(values))


def delete_state(tx: Transaction, keys: Sequence[str]) -> int:
    """Delete ``keys``; how many rows there were."""
    return tx.execute(f"DELETE FROM budget_state WHERE key IN {_marks(len(keys))}",
                      tuple(keys)).rowcount


@dataclass(frozen=True)
class PolicyRow:
    """The shared policy row as stored (``written_at`` is the stored text)."""

    authority: str
    policy: str
    written_at: str


def read_policy(tx: Transaction) -> PolicyRow | None:
    """The policy row, or None when no process has published one."""
    row = tx.execute(_READ_POLICY).fetchone()
    return None if row is None else PolicyRow(str(row[0]), str(row[1]), str(row[2]))


def publish_policy(tx: Transaction, *, authority: str, policy: str, now: datetime,
                   replace: bool) -> bool:
    """Write the policy row; ``replace=False`` only when there is none. True if written."""
    params = {"authority": authority, "policy": policy, "written_at": to_db_time(now)}
    return tx.execute(_REPLACE_POLICY if replace else _PUBLISH_IF_ABSENT,
                      params).rowcount == 1
