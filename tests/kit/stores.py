"""The one store builder of the tests: a fresh store at this code's schema on either
backend, copied from a migrated template instead of replaying every migration.

- ``open_database(backend, tmp_path)``: the SQLite file, or a PostgreSQL database copied
  from the template once per test process and reset to its state between tests
  (``tests/databases.py``'s ``migrated_database``); the ``database`` fixture runs a test
  on each of ``BACKENDS``.
- ``new_sqlite_store(path)``: a ``SqliteStore`` on a new file at ``path``, a copy of the
  template; a test that opens the file again (a second process's handle) uses
  ``SqliteStore(path)`` itself.

A test about the migrations themselves builds its store from nothing, on purpose.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from service.storage.database import Database
from service.storage.postgres import PostgresStore
from service.storage.sqlite import SqliteStore
from tests.databases import migrated_database

__all__ = ["BACKENDS", "migrated_sqlite_file", "new_sqlite_store", "open_database"]

BACKENDS = ("sqlite", "postgres")
_template: list[Path] = []


def _sqlite_template() -> Path:
    """A SQLite file at this code's schema, made once per test process and copied."""
    if _template and _template[0].exists():
        return _template[0]
    path = Path(tempfile.mkdtemp(prefix="prra-template-")) / "state.db"
    SqliteStore(path).close()  # closing checkpoints the WAL: the one file is the store
    _template[:] = [path]
    return path


def migrated_sqlite_file(path: Path) -> Path:
    """A SQLite store file at ``path`` already at this code's schema (a copied template),
    for a test that opens it itself. Returns ``path``."""
    shutil.copyfile(_sqlite_template(), path)
    return path


@contextmanager
def open_database(backend: str, tmp_path: Path) -> Iterator[Database]:
    """A fresh, migrated store on ``backend`` (a copy of a migrated template), closed (and
    dropped) afterwards."""
    if backend == "sqlite":
        with SqliteStore(migrated_sqlite_file(tmp_path / "state.db")) as store:
            yield store
        return
    with migrated_database() as conninfo, PostgresStore(conninfo) as pg:
        yield pg


def new_sqlite_store(path: Path | str, **options: Any) -> SqliteStore:
    """A ``SqliteStore`` on a new file at ``path`` (a copy of the migrated template);
    ``options`` are ``SqliteStore``'s."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists: open it with SqliteStore(path)")
    return SqliteStore(migrated_sqlite_file(path), **options)
