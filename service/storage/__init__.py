"""The storage layer: the only package that talks to a database.

- ``database.py``: the ``Database`` protocol everything else is written against.
- ``sqlite.py``: its implementation on one SQLite file; ``migrate.py`` and
  ``migrations.py``: the schema and how it is applied; ``times.py``: the stored form of
  an instant; ``errors.py``: the store's errors, whatever the backend.
- One module per table (``queue``, ``ledger``, ``runs``, ``deliveries``, ...): each is the
  only place that table's SQL is written, and takes a ``Transaction``.

docs/ARCHITECTURE.md has the table of which module owns which table.
"""

from service.storage.database import Database, Leadership, OpenTransaction, Rows, Transaction
from service.storage.errors import (
    STORE_ERRORS,
    MigrationError,
    NestedTransactionError,
    StoreClosedError,
    is_contention,
    is_unavailable,
)
from service.storage.migrate import migrate
from service.storage.migrations import MIGRATIONS
from service.storage.sqlite import HEAD_VERSION, SqliteStore
from service.storage.times import from_db_time, to_db_time
from service.storage.watermarks import watermark_key

__all__ = [
    "HEAD_VERSION",
    "MIGRATIONS",
    "STORE_ERRORS",
    "Database",
    "Leadership",
    "MigrationError",
    "NestedTransactionError",
    "OpenTransaction",
    "Rows",
    "SqliteStore",
    "StoreClosedError",
    "Transaction",
    "from_db_time",
    "is_contention",
    "is_unavailable",
    "migrate",
    "to_db_time",
    "watermark_key",
]
