"""The PostgreSQL store: the same ``Database`` as ``SqliteStore``, for several hosts.

``store.url`` in the config selects it. Writers are ordered by one advisory lock,
``WRITE_LOCK``, taken at the start of every write transaction:

- an ordinary ``transaction()`` takes it *exclusively*: exactly the guarantee SQLite's
  ``BEGIN IMMEDIATE`` gives, one writer at a time across every connection, thread,
  process and host, so any read-then-write inside it (a delivery id checked and
  recorded, a watermark compared and moved) is atomic against every other writer;
- a ``transaction(concurrent=True)`` (the claim, a lease renewed, released or finished)
  takes it *shared*, so such transactions run side by side, and keep their own
  invariants with row locks (``skip_locked``: ``FOR UPDATE SKIP LOCKED``) and named
  transaction-scoped advisory locks (``lock``/``try_lock``): the budget's admission,
  one pull request's lease. An exclusive writer still waits for them and they for it.

A wait for a lock gives up after ``lock_timeout`` seconds with the same "contention"
meaning as SQLite's busy timeout (``is_contention``). Reads run in one ``REPEATABLE
READ`` snapshot and take no lock.

The table modules write ``?`` and ``:name`` placeholders; ``Transaction.execute`` rewrites
them for psycopg (``%s``, ``%(name)s``), once per statement text.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
import select
import threading
import time
import zlib
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Final, TypeVar

import anyio.to_thread
import psycopg
from psycopg_pool import ConnectionPool

from service.storage.database import OffLoop
from service.storage.errors import MigrationError, NestedTransactionError, StoreClosedError
from service.storage.pg_leadership import SessionLeadership, application_name, leader_lock_key
from service.storage.pg_schema import PG_MIGRATIONS

log = logging.getLogger(__name__)

__all__ = ["NAMED_LOCK", "PG_HEAD_VERSION", "START_WAIT", "WRITE_LOCK", "PostgresStore",
           "translate_placeholders"]

T = TypeVar("T")

PG_HEAD_VERSION: Final = len(PG_MIGRATIONS)
"""The schema version this code writes on PostgreSQL."""

WRITE_LOCK: Final = 0x70726100  # "pra\\0": the one lock every write transaction holds
_MIGRATE_LOCK: Final = 0x70726101
NAMED_LOCK: Final = 0x7072620000000000  # plus the name's crc32 (``lock``/``try_lock``)
DEFAULT_LOCK_TIMEOUT: Final = 5.0
#: How long a caller waits for a connection before failing as "unavailable". In an outage
#: a webhook is answered 503 after this long: well inside GitHub's 10 s, and inside the
#: 5 s docs/SCALING.md promises.
POOL_WAIT: Final = 3.0
RECONNECT_GIVE_UP: Final = 10.0

# A placeholder outside a quoted string: ``?``, or ``:name`` (not ``::``, a cast).
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|::|\?|:(\w+)|%")


@functools.lru_cache(maxsize=512)
def translate_placeholders(sql: str) -> str:
    """``sql`` with the table modules' ``?`` and ``:name`` as psycopg's ``%s`` and
    ``%(name)s`` (none read inside quoted strings or ``::`` casts), every literal ``%``
    doubled, inside quotes too: psycopg reads them all."""
    def one(match: re.Match[str]) -> str:
        text = match.group(0)
        if text == "?":
            return "%s"
        if text == "%":
            return "%%"
        if match.group(1) is not None:
            return f"%({match.group(1)})s"
        # A quoted string or a cast: no placeholder in it, but psycopg reads every ``%``.
        return text.replace("%", "%%")
    return _TOKENS.sub(one, sql)


class _Transaction:
    """One connection inside an open transaction, as the table modules see it."""

    _serials = itertools.count()

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        # The change marker: which transaction (a serial, never reused as ``id`` can be)
        # and how many statements other than SELECT it has run.
        self.serial = next(self._serials)
        self.writes = 0

    def execute(self, sql: str, parameters: Any = (), /) -> psycopg.Cursor[Any]:
        if not sql.lstrip().upper().startswith("SELECT"):
            self.writes += 1
        # Always a parameter sequence (even empty): psycopg then reads the rewritten text's
        # placeholders and doubled ``%``, which it would send as they are without one.
        params = parameters if isinstance(parameters, Mapping) else tuple(parameters)
        return self._conn.execute(translate_placeholders(sql), params)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /
                    ) -> psycopg.Cursor[Any]:
        self.writes += 1
        cursor = self._conn.cursor()
        cursor.executemany(translate_placeholders(sql), [tuple(p) for p in parameters])
        return cursor


_BEGIN_EXCLUSIVE: Final = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK:d})"
_BEGIN_SHARED: Final = f"BEGIN; SELECT pg_advisory_xact_lock_shared({WRITE_LOCK:d})"


def _named(name: str) -> int:
    return NAMED_LOCK + zlib.crc32(name.encode())


#: What libpq says when the settings, not the moment, are wrong: waiting will not help.
_PERMANENT: Final = ("authentication failed", "password", "does not exist",
                     "no pg_hba.conf entry", "invalid", "certificate")
START_WAIT: Final = 30.0


def _first_connection(url: str, kwargs: dict[str, Any]) -> None:
    """One connection before the pool opens. A server that is not up yet (starting, failing
    over, its socket not there) is waited for, up to ``START_WAIT`` seconds, as a replica
    started in the middle of a failover should; a wrong password, database or host name
    fails at once, in the server's own words, instead of after the pool's 30 s."""
    deadline = time.monotonic() + START_WAIT
    while True:
        try:
            psycopg.connect(url, **kwargs, connect_timeout=10).close()
            return
        except psycopg.OperationalError as exc:
            if any(word in str(exc) for word in _PERMANENT) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


class _State(threading.local):
    joined: _Transaction | None = None
    reading: bool = False


def _check_quickly(conn: psycopg.Connection[Any]) -> None:
    """The pool's check before it lends ``conn``, without a round trip while the
    connection is live: a server ending a connection (a restart, a failover, an
    administrator's terminate) says so on the socket before it closes it, so a socket with
    nothing to read is a live connection. One with something to read gets the full check
    (an empty query), which fails on a dead connection, and the pool replaces it."""
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)


def _rollback_quietly(conn: psycopg.Connection[Any]) -> None:
    # After a failed statement the transaction is aborted; after a lost connection there
    # is nothing to roll back. Either way the original error is the one to report.
    try:
        if not conn.closed:
            conn.execute("ROLLBACK")
    except psycopg.Error:
        pass


class PostgresStore(OffLoop):
    """The durable store on a PostgreSQL database: ``PostgresStore(url)`` connects and
    migrates it. ``password`` (from ``store.password_file``) is passed to the driver, never
    put in the URL; libpq's own ``PG*`` environment applies as usual."""

    def __init__(self, url: str, *, password: str | None = None,
                 lock_timeout: float = DEFAULT_LOCK_TIMEOUT, max_connections: int = 10,
                 migrations: Sequence[tuple[str, ...]] = PG_MIGRATIONS,
                 name: str | None = None) -> None:
        self._url = url
        # ``name``: what the server shows for these connections (``application_name``).
        kwargs: dict[str, Any] = {"autocommit": True,
                                  "application_name": name or application_name()}
        if password is not None:
            kwargs["password"] = password
        timeout_ms = int(lock_timeout * 1000)

        def configure(conn: psycopg.Connection[Any]) -> None:
            conn.execute(f"SET lock_timeout = {timeout_ms:d}")
            conn.execute("SET TIME ZONE 'UTC'")

        self._kwargs = kwargs
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url, kwargs=kwargs, min_size=1, max_size=max_connections, configure=configure,
            # A connection is checked before it is lent, so one the server dropped (a
            # restart, a failover) is replaced instead of failing the next transaction;
            # the check costs no round trip while the connection is live.
            check=_check_quickly, open=False, name="pr-review-agent",
            # A caller waits at most this long for a connection, then fails as
            # "unavailable": a webhook is answered 503 well inside GitHub's 10 seconds.
            timeout=POOL_WAIT,
            # The pool's reconnection backs off exponentially until it gives up after this
            # long, and the next caller starts again from a second: so a server back from
            # an outage is reconnected to within seconds, whatever the outage's length.
            reconnect_timeout=RECONNECT_GIVE_UP)
        self._state = _State()
        self._closed = False
        try:
            _first_connection(url, kwargs)
            self._pool.open(wait=True, timeout=30)
            self._migrate(migrations)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        """The URL this store connected with (it never holds the password)."""
        return self._url

    @property
    def head_version(self) -> int:
        """The schema version this code writes on this backend."""
        return PG_HEAD_VERSION

    def close(self) -> None:
        """Close every connection. Idempotent."""
        self._closed = True
        self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self._url!r})"

    # -- transactions --

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self._url!r} is closed")

    @contextmanager
    def transaction(self, *, concurrent: bool = False) -> Iterator[_Transaction]:
        """One write transaction holding ``WRITE_LOCK`` (shared when ``concurrent``):
        COMMIT on return, ROLLBACK on raise."""
        self._check_open()
        state = self._state
        if state.joined is not None:
            raise NestedTransactionError("transaction() is already open on this thread")
        if state.reading:
            raise NestedTransactionError(
                "transaction() inside read(): finish the read before writing")
        with self._pool.connection() as conn:
            try:
                # One round trip for both (a query without parameters may hold several
                # statements): on a busy server each round trip is time every claim waits.
                conn.execute(_BEGIN_SHARED if concurrent else _BEGIN_EXCLUSIVE)
                tx = _Transaction(conn)
                state.joined = tx
                try:
                    yield tx
                finally:
                    state.joined = None
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise

    def try_begin(self) -> None:
        """None: every statement is a round trip to the server, which the event loop must
        not wait for (the webhook route writes on a worker thread here)."""
        return

    @contextmanager
    def read(self) -> Iterator[_Transaction]:
        """A read of one snapshot; inside ``transaction()`` it shares that one."""
        state = self._state
        if state.joined is not None:
            yield state.joined
            return
        self._check_open()
        with self._pool.connection() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            state.reading = True
            try:
                yield _Transaction(conn)
                conn.execute("COMMIT")
            except BaseException:
                _rollback_quietly(conn)
                raise
            finally:
                state.reading = False

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        """``func(*args)`` on a worker thread."""
        return await anyio.to_thread.run_sync(func, *args)

    def leadership(self, role: str) -> SessionLeadership:
        """The election for ``role``, by a session advisory lock named for it."""
        return SessionLeadership(self._url, self._kwargs, leader_lock_key(role))

    @property
    def in_process(self) -> bool:
        """False: every statement is a round trip to the server."""
        return False

    @property
    def skip_locked(self) -> str:
        """``FOR UPDATE SKIP LOCKED``: the rows are this transaction's, or not offered."""
        return "FOR UPDATE SKIP LOCKED"

    def lock(self, tx: Any, name: str) -> None:
        """``pg_advisory_xact_lock`` on ``name``: waits (up to ``lock_timeout``)."""
        tx.execute("SELECT pg_advisory_xact_lock(?)", (_named(name),))

    def try_lock(self, tx: Any, name: str) -> bool:
        """``pg_try_advisory_xact_lock`` on ``name``: at once, or False."""
        row = tx.execute("SELECT pg_try_advisory_xact_lock(?)", (_named(name),)).fetchone()
        return bool(row and row[0])

    def change_marker(self, tx: Any) -> Hashable:
        """This transaction and the writes it made: valid within one transaction only,
        since another host may commit between two of ours."""
        return (getattr(tx, "serial", id(tx)), getattr(tx, "writes", 0))

    @property
    def version(self) -> int:
        """The database's schema version."""
        with self.read() as tx:
            row = tx.execute("SELECT version FROM schema_version").fetchone()
        return 0 if row is None else int(row[0])

    # -- migrations --

    def _migrate(self, migrations: Sequence[tuple[str, ...]]) -> None:
        with self._pool.connection() as conn:
            conn.execute("BEGIN")
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version"
                             " (version INTEGER NOT NULL)")
                row = conn.execute("SELECT version FROM schema_version").fetchone()
                version = 0 if row is None else int(row[0])
                if version > len(migrations):
                    raise MigrationError(
                        f"store is at schema version {version}, newer than this code's "
                        f"{len(migrations)}; refusing to run against it")
                for statement in (s for m in migrations[version:] for s in m):
                    conn.execute(statement)
                migrated = (version, len(migrations)) if version < len(migrations) else None
                if row is None:
                    conn.execute("INSERT INTO schema_version (version) VALUES (%s)",
                                 (len(migrations),))
                else:
                    conn.execute("UPDATE schema_version SET version = %s",
                                 (len(migrations),))
                conn.execute("COMMIT")
            except psycopg.Error as exc:
                _rollback_quietly(conn)
                raise MigrationError(f"migrating {self._url!r} failed: {exc}") from exc
            except BaseException:
                _rollback_quietly(conn)
                raise
        if migrated is not None:  # one line for the lot, as the SQLite store says it
            log.info("store migrated from schema version %d to %d", *migrated,
                     extra={"schema_version": migrated[1], "from_version": migrated[0]})
