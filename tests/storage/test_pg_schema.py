"""PostgreSQL's schema (``pg_schema.PG_MIGRATIONS``) holds the same tables and columns as
the SQLite file's, so every table module's SQL means the same on both."""

from __future__ import annotations

from pathlib import Path

import psycopg

from service.storage.sqlite import SqliteStore
from tests.databases import throwaway_database


def sqlite_columns(path: Path) -> dict[str, set[str]]:
    with SqliteStore(path) as store, store.read() as tx:
        tables = [str(r[0]) for r in tx.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE 'sqlite_%'")]
        return {t: {str(r[1]) for r in tx.execute(f"PRAGMA table_info({t})")} for t in tables}


def postgres_columns() -> dict[str, set[str]]:
    with throwaway_database(migrated=True) as conninfo, psycopg.connect(conninfo) as conn:
        found: dict[str, set[str]] = {}
        for table, column in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns"
                " WHERE table_schema = 'public'"):
            found.setdefault(str(table), set()).add(str(column))
        return found


def test_both_backends_have_the_same_tables_and_columns(tmp_path: Path) -> None:
    lite, pg = sqlite_columns(tmp_path / "state.db"), postgres_columns()
    lite.pop("schema_version", None)
    pg.pop("schema_version", None)
    assert sorted(lite) == sorted(pg)
    assert {t: sorted(c) for t, c in lite.items()} == {t: sorted(c) for t, c in pg.items()}
