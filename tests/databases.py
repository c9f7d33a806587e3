"""Real databases for the tests: a SQLite file in ``tmp_path``, or a throwaway PostgreSQL
database made for one test and dropped after it.

PostgreSQL is reached at ``$PR_REVIEW_AGENT_PG`` (a libpq URL or conninfo for a role that
may create databases), by default the local socket (``.ci/run`` starts the server and gives
root a role). Where no server answers, the PostgreSQL half of a test is skipped on a
developer's machine and fails under ``.ci/run`` (which sets ``PR_REVIEW_AGENT_PG_REQUIRED``)
or ``CI=true``: CI never passes by leaving a backend out.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from service.runtime.pids import alive
from service.storage.pg_schema import PG_MIGRATIONS
from service.storage.postgres import PostgresStore

ADMIN_ENV = "PR_REVIEW_AGENT_PG"
REQUIRED_ENV = "PR_REVIEW_AGENT_PG_REQUIRED"
DEFAULT_ADMIN = "postgresql:///postgres?host=/var/run/postgresql"


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
def throwaway_database(*, migrated: bool = False) -> Iterator[str]:
    """A new database (byte-order collation, as the store expects); its conninfo. Empty,
    or with ``migrated`` a copy of a template already at this code's schema (one
    ``CREATE DATABASE … TEMPLATE``, instead of replaying every migration). Dropped
    afterwards, even with connections still open."""
    require_postgres()
    name = f"prra_test_{secrets.token_hex(6)}"
    template = _pg_template() if migrated else "template0"
    with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" ENCODING \'UTF8\'')
    try:
        yield make_conninfo(admin_conninfo(), dbname=name)
    finally:
        with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: A process's migrated databases, free to hand out again (reset, as after the template).
_free: list[str] = []
#: Databases a test process made for ``migrated_database``, dropped when it exits.
_made: list[str] = []
_POOLED_PREFIX = "prra_pooled_"


@contextmanager
def migrated_database() -> Iterator[str]:
    """A database at this code's schema with nothing in it; its conninfo.

    A copy of the migrated template costs the server about a third of a CPU-second to make
    and drop, and the suite asks for hundreds. So each test process keeps the copies it
    made: one handed back is reset to the template's state — every session still on it
    ended, every table but ``schema_version`` emptied, identities restarted — and handed
    out again; one that cannot be reset in a few seconds is dropped instead. Nested uses
    get different databases."""
    require_postgres()
    name = _free.pop() if _free else _new_pooled()
    clean = False
    try:
        yield make_conninfo(admin_conninfo(), dbname=name)
        clean = _reset(name)
    finally:
        if clean:
            _free.append(name)
        else:
            _drop(name)


def _new_pooled() -> str:
    name = f"{_POOLED_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
        if not _made:  # the first of this process: clear what dead processes left behind
            for (old,) in admin.execute("SELECT datname FROM pg_database WHERE datname LIKE %s",
                                        (_POOLED_PREFIX + "%",)).fetchall():
                pid = old[len(_POOLED_PREFIX):].split("_")[0]
                if pid.isdigit() and not alive(int(pid)):
                    admin.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
        admin.execute(
            f'CREATE DATABASE "{name}" TEMPLATE "{_pg_template()}" ENCODING \'UTF8\'')
    if not _template_set:  # a fresh copy holds exactly what the template does
        with psycopg.connect(make_conninfo(admin_conninfo(), dbname=name),
                             autocommit=True) as conn:
            _template_set.append(_objects(conn))
    if not _made:
        atexit.register(_drop_made)
    _made.append(name)
    return name


def _reset(name: str) -> bool:
    """Empty ``name`` back to the template's state; False when that cannot be done."""
    try:
        with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        with psycopg.connect(make_conninfo(admin_conninfo(), dbname=name),
                             autocommit=True) as conn:
            conn.execute("SET lock_timeout = '5s'")
            if _objects(conn) != _template_objects():
                return False  # a test added a trigger, a function or a table: not reused
            tables = [t for (t,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                " AND tablename <> 'schema_version'").fetchall()]
            if tables:
                conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables)
                             + " RESTART IDENTITY")
        return True
    except psycopg.Error:
        return False


#: What a database's schema holds besides rows: its tables, triggers and functions. A
#: pooled database whose set differs from the template's (a test added a failing trigger)
#: is dropped rather than handed out again.
_OBJECTS = """
SELECT 'table ' || tablename FROM pg_tables WHERE schemaname = 'public'
UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal
UNION ALL SELECT 'function ' || proname FROM pg_proc p JOIN pg_namespace n
    ON n.oid = p.pronamespace WHERE n.nspname = 'public'
"""
_template_set: list[frozenset[str]] = []


def _objects(conn: psycopg.Connection[Any]) -> frozenset[str]:
    return frozenset(str(r[0]) for r in conn.execute(_OBJECTS).fetchall())


def _template_objects() -> frozenset[str]:
    """The template's set, read from a fresh copy of it (``_new_pooled``): a session on
    the template itself would make every concurrent copy of it fail."""
    return _template_set[0]


def _drop(name: str) -> None:
    with contextlib.suppress(psycopg.Error), psycopg.connect(
            admin_conninfo(), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    with contextlib.suppress(ValueError):
        _made.remove(name)


def _drop_made() -> None:
    for name in list(_made):
        _drop(name)
    _free.clear()


_TEMPLATE_PREFIX = "prra_template_"
_TEMPLATE_LOCK = 0x70727261  # an advisory lock key of the tests' own
_templates: dict[str, str] = {}


def _schema_digest(migrations: object) -> str:
    return hashlib.sha256(repr(migrations).encode()).hexdigest()[:12]


def _pg_template() -> str:
    """The name of a database migrated to this code's PostgreSQL schema, made once per
    schema (named by a digest of its migrations) and shared by every test process: the
    first to need it builds it under an advisory lock, the rest wait and copy it."""
    if "postgres" in _templates:
        return str(_templates["postgres"])
    name = _TEMPLATE_PREFIX + _schema_digest(PG_MIGRATIONS)
    with psycopg.connect(admin_conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
        try:
            found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                  (name,)).fetchone()
            if found is None:
                building = name + "_building"
                admin.execute(f'DROP DATABASE IF EXISTS "{building}" WITH (FORCE)')
                admin.execute(
                    f'CREATE DATABASE "{building}" TEMPLATE template0 ENCODING \'UTF8\'')
                PostgresStore(make_conninfo(admin_conninfo(), dbname=building)).close()
                admin.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
                # Templates of an older schema are of no more use.
                for (old,) in admin.execute(
                        "SELECT datname FROM pg_database WHERE datname LIKE %s"
                        " AND datname != %s", (_TEMPLATE_PREFIX + "%", name)).fetchall():
                    admin.execute(f'DROP DATABASE IF EXISTS "{old}" WITH (FORCE)')
        finally:
            admin.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))
    _templates["postgres"] = name
    return name


def as_url(conninfo: str) -> tuple[str, str | None]:
    """``conninfo`` as the ``postgresql://`` URL a config's ``store.url`` takes, and its
    password apart (a config reads it from ``store.password_file``, never the URL)."""
    params = {key: str(value) for key, value in conninfo_to_dict(conninfo).items()}
    password = params.pop("password", None)
    user = params.pop("user", "")
    dbname = params.pop("dbname", "")
    host = params.get("host", "")
    netloc = ""
    if host and not host.startswith("/"):
        params.pop("host")
        port = params.pop("port", None)
        netloc = host + (f":{port}" if port else "")
    if user:
        netloc = f"{quote(user, safe='')}@{netloc}"
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql://{netloc}/{quote(dbname, safe='')}{query}", password


def _server_binary(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


@dataclass
class Cluster:
    """A PostgreSQL server of one test's own: its data and socket in a directory of its
    own, no TCP, trust for local connections. ``restart`` crashes and restarts it (what
    a failover or a server restart does to every connection) without touching anyone
    else's database."""

    directory: Path
    pg_ctl: str

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def conninfo(self) -> str:
        return make_conninfo(host=str(self.directory), port=CLUSTER_PORT, user="postgres",
                             dbname="postgres")

    def _run(self, *args: str) -> None:
        subprocess.run([*_as_server_user(), self.pg_ctl, "-D", str(self.data), *args],
                       check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        self._run("-w", "-l", str(self.directory / "server.log"), "-o",
                  f"-k {self.directory} -p {CLUSTER_PORT} -c listen_addresses=''", "start")

    def restart(self) -> None:
        """Stop at once (``-m immediate``: connections cut, no checkpoint; the start
        recovers from the WAL) and start again."""
        self._run("-m", "immediate", "-w", "stop")
        self.start()

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("-m", "immediate", "-w", "stop")


CLUSTER_PORT = 5432  # the socket is in the cluster's own directory: no clash


def _as_server_user() -> list[str]:
    # initdb and the server refuse to run as root: as root, they run as ``postgres``.
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


@contextmanager
def private_cluster(password: str | None = None) -> Iterator[Cluster]:
    """A fresh ``Cluster``, started; stopped and removed afterwards. With ``password``,
    the ``postgres`` role has it and every connection must give it (scram-sha-256).
    Skipped (failed under CI) where the server's binaries are not installed."""
    initdb, pg_ctl = _server_binary("initdb"), _server_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        problem = "no PostgreSQL server binaries (initdb, pg_ctl) to make a cluster with"
        if os.environ.get("CI") or os.environ.get(REQUIRED_ENV):
            pytest.fail(problem)
        pytest.skip(problem)
    # Not under pytest's tmp_path: the server's user must be able to reach the directory.
    directory = Path(tempfile.mkdtemp(prefix="prra-pg-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(directory, "postgres", "postgres")
        auth = ["--auth=trust"]
        if password is not None:
            pwfile = directory / "initdb-password"
            pwfile.write_text(password)
            if os.geteuid() == 0:
                shutil.chown(pwfile, "postgres", "postgres")
            auth = ["--auth=scram-sha-256", f"--pwfile={pwfile}"]
        subprocess.run([*_as_server_user(), initdb, "-D", str(directory / "data"), *auth,
                        "--username=postgres", "--encoding=UTF8", "--no-sync"],
                       check=True, capture_output=True, timeout=120)
        cluster = Cluster(directory, pg_ctl)
        cluster.start()
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
