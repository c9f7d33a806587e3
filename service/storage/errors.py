"""The store's errors, as the rest of the service sees them, whatever the backend.

``STORE_ERRORS`` is what a caller catches when "the store failed" is an outcome it
reports (a health check, a delivery answered 503) rather than a bug; ``is_contention``
tells a lock wait that gave up (skip this cycle, try again) from a genuine fault.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import psycopg
import psycopg_pool

__all__ = [
    "STORE_ERRORS",
    "MigrationError",
    "NestedTransactionError",
    "StoreClosedError",
    "is_contention",
    "is_unavailable",
]


class MigrationError(RuntimeError):
    """A migration could not be applied; the database is left at the version it had."""


class NestedTransactionError(RuntimeError):
    """``transaction()`` was entered on a thread already inside one (or inside ``read()``)."""


class StoreClosedError(RuntimeError):
    """The store was used after ``close()``."""


STORE_ERRORS: Final[tuple[type[Exception], ...]] = (sqlite3.Error, psycopg.Error,
                                                    StoreClosedError)
"""Every error a backend raises for a failed statement or connection, and closed use."""

# SQLite's primary result codes for "someone else holds the lock"; extended codes
# (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_RECOVERY, SQLITE_LOCKED_SHAREDCACHE, ...) carry
# the primary code in their low byte.
_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_PG_CONTENTION: Final = ("55P03", "40P01", "40001")
# Connection exceptions (08), the server shutting down or refusing for now (57P0x).
_PG_UNAVAILABLE: Final = ("08", "57")
_CONTENTION_MESSAGES: Final = (
    "database is locked",
    "database table is locked",
    "database schema is locked",
)


def is_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` says the database server cannot be reached now (a restart, a
    failover, a dropped connection, no connection free in time): wait and try again, as
    for contention. False for every other error, the file's included."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, psycopg_pool.PoolTimeout):
            return True
        if isinstance(current, psycopg.OperationalError) and (
                current.sqlstate is None or current.sqlstate[:2] in _PG_UNAVAILABLE):
            return True
        current = current.__cause__
    return False


def is_contention(exc: BaseException) -> bool:
    """True when ``exc`` is the store giving up on a lock wait, False for a genuine fault.

    The poll loop skips a cycle for the first and crashes for the second. Explicitly
    chained causes (``raise ... from exc``, as ``MigrationError`` does) are followed.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        # PostgreSQL: a wait for the write lock past lock_timeout (55P03), a deadlock or
        # serialization failure (40P01, 40001): another writer, try again.
        if isinstance(current, psycopg.Error) and current.sqlstate in _PG_CONTENTION:
            return True
        if isinstance(current, sqlite3.OperationalError):
            code = getattr(current, "sqlite_errorcode", None)
            if isinstance(code, int):
                if code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED):
                    return True
            else:
                # Raised without a result code (re-raised by other code, or built by
                # hand): the message is all there is to go on.
                message = str(current).lower()
                if any(message.startswith(m) for m in _CONTENTION_MESSAGES):
                    return True
        current = current.__cause__
    return False
