"""``pr-review-agent migrate``: creates a store or brings it to this code's schema."""

from __future__ import annotations

import io
import sqlite3
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

from service.cli.main import main
from service.storage.migrations import MIGRATIONS
from service.storage.sqlite import HEAD_VERSION, SqliteStore

ROOT = Path(__file__).resolve().parents[2]



def test_migrate_cli_creates_and_upgrades(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["migrate", "--store", str(fresh)]) == 0
    assert out.getvalue() == f"{fresh}: schema version {HEAD_VERSION}\n"

    old = tmp_path / "old.db"
    SqliteStore(old, migrations=MIGRATIONS[:7]).close()
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["migrate", "--store", str(old)]) == 0
    assert out.getvalue().endswith(f"schema version {HEAD_VERSION}\n")
    with SqliteStore(old) as store:
        assert store.version == HEAD_VERSION


def test_migrate_as_a_subprocess(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    done = subprocess.run(
        [sys.executable, "-m", "service", "migrate", "--store", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{path}: schema version {HEAD_VERSION}\n"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == HEAD_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_migrate_with_a_config_naming_postgresql_creates_its_schema(tmp_path: Path) -> None:
    from psycopg.conninfo import make_conninfo

    from service.storage.postgres import PG_HEAD_VERSION, PostgresStore
    from tests.databases import as_url, throwaway_database
    from tests.webhook_env import write_config

    with throwaway_database() as conninfo:
        url, _ = as_url(conninfo)
        config = write_config(tmp_path, store={"url": url})
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(["migrate", "--config", str(config)]) == 0
        assert out.getvalue() == f"{url}: schema version {PG_HEAD_VERSION}\n"
        with PostgresStore(make_conninfo(conninfo)) as store:
            assert store.version == PG_HEAD_VERSION
