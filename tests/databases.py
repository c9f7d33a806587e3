"""Real databases for the tests: a SQLite file in ``tmp_path``, or a throwaway PostgreSQL
database made for one test and dropped after it.

PostgreSQL is reached at ``$PR_REVIEW_AGENT_PG`` (a libpq URL or conninfo for a role that
may create databases), by default the local socket (``.ci/run`` starts the server and gives
root a role). Where no server answers, the PostgreSQL half of a test is skipped on a
developer's machine and fails under ``.ci/run`` (which sets ``PR_REVIEW_AGENT_PG_REQUIRED``)
or ``CI=true``: CI never passes by leaving a backend out.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from service.storage import Database, SqliteStore
from service.storage.postgres import PostgresStore

ADMIN_ENV = "PR_REVIEW_AGENT_PG"
REQUIRED_ENV = "PR_REVIEW_AGENT_PG_REQUIRED"
DEFAULT_ADMIN = "postgresql:///postgres?host=/var/run/postgresql"
BACKENDS = ("sqlite", "postgres")


def admin_conninfo() -> str:
    return os.environ.get(ADMIN_ENV, DEFAULT_ADMIN)


def postgres_problem() -> str | None:
    """Why no PostgreSQL server can be used here, or None."""
    try:
        with psycopg.connect(admin_conninfo(), autocommit=True, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"no PostgreSQL at {ADMIN_ENV}={admin_conninfo()!r}: {exc}".strip()


def require_postgres() -> None:
    """Skip (fail under CI) when there is no server to test against."""
    problem = postgres_problem()
    if problem is None:
        return
    if os.environ.get("CI") or os.environ.get(REQUIRED_ENV):
        pytest.fail(f"{problem} (CI must test both backends; .ci/run starts the server)")
    pytest.skip(problem)


@contextmanager
def throwaway_database() -> Iterator[str]:
    """A new, empty database (byte-order collation, as the store expects); its conninfo.
    Dropped afterwards, even with connections still open."""
    require_postgres()
    name = f"prra_test_{secrets.token_hex(6)}"
    with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\'')
    try:
        yield make_conninfo(admin_conninfo(), dbname=name)
    finally:
        with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def open_database(backend: str, tmp_path: Path) -> Iterator[Database]:
    """A fresh, migrated store on ``backend``, closed (and dropped) afterwards."""
    if backend == "sqlite":
        with SqliteStore(tmp_path / "state.db") as store:
            yield store
        return
    with throwaway_database() as conninfo, PostgresStore(conninfo) as pg:
        yield pg
