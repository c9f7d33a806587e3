"""The migration runner for a SQLite file: ``PRAGMA user_version`` counts what has run.

The schema itself is ``migrations.py``; this module only applies it, one migration per
transaction, so a crash or a failing statement leaves the file at the version it had.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence

from service.storage.errors import MigrationError

__all__ = ["migrate", "user_version"]

logger = logging.getLogger(__name__)


def user_version(conn: sqlite3.Connection) -> int:
    """The file's schema version."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def rollback_if_open(conn: sqlite3.Connection) -> None:
    """ROLLBACK when a transaction is open, and only then.

    A failing statement may already have ended the transaction (SQLite rolls back on
    some errors by itself); ROLLBACK with none open would mask the original error.
    """
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def migrate(conn: sqlite3.Connection, migrations: Sequence[tuple[str, ...]]) -> int:
    """Apply every migration the file has not had yet and return the version reached.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Migration *n* (1-based)
    runs with its ``user_version`` bump in one ``BEGIN IMMEDIATE`` transaction, so a crash or
    a failing statement leaves neither, and the next start simply re-applies it. The
    version is re-read under the write lock because another process may have migrated the
    file between our read and our lock.
    """
    if conn.in_transaction:
        raise MigrationError("migrate() needs a connection with no open transaction")
    head = len(migrations)
    version = start = user_version(conn)
    while True:
        if version > head:
            raise MigrationError(
                f"store is at schema version {version}, newer than this code's {head}; "
                "refusing to run against it"
            )
        if version == head:
            if version > start:  # one line for the lot, not one per migration
                logger.info("store migrated from schema version %d to %d", start, version,
                            extra={"schema_version": version, "from_version": start})
            return version
        target = version + 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            current = user_version(conn)
            if current == version:
                for statement in migrations[version]:
                    conn.execute(statement)
                # PRAGMA takes no bound parameters; target is an int we computed.
                conn.execute(f"PRAGMA user_version = {target:d}")
                current = target
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            rollback_if_open(conn)
            raise MigrationError(f"migration {target} failed: {exc}") from exc
        except BaseException:
            rollback_if_open(conn)
            raise
        version = current
