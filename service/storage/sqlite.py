"""The SQLite store: one file, in WAL mode, holding everything that must survive a restart.

``SqliteStore`` is the one ``Database`` (see ``database.py``) today. Every write goes
through ``transaction()``, which takes the write lock up front with ``BEGIN IMMEDIATE``:
that is what makes a read-then-write sequence (a queue claim and the budget reservation
it spends) atomic against every other connection, thread or process on the same file.
The schema is ``migrations.py``, applied by ``migrate.py`` when the store opens.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Final, TypeVar, cast

import anyio.to_thread

from service.storage.database import OffLoop, Transaction
from service.storage.errors import NestedTransactionError, StoreClosedError, is_contention
from service.storage.migrate import migrate, rollback_if_open, user_version
from service.storage.migrations import MIGRATIONS

__all__ = ["DEFAULT_BUSY_TIMEOUT", "HEAD_VERSION", "OpenTransaction", "SqliteStore"]

T = TypeVar("T")

HEAD_VERSION: Final = len(MIGRATIONS)
"""The schema version this code writes: how many migrations it knows."""

DEFAULT_BUSY_TIMEOUT: Final = 5.0
"""Seconds a connection waits for another's write lock before SQLite gives up."""


class _ThreadState(threading.local):
    """What one thread holds: its connection, and whether it is inside a block."""

    conn: sqlite3.Connection | None = None
    in_transaction: bool = False
    read_depth: int = 0
    joined: sqlite3.Connection | None = None  # an OpenTransaction in use on this thread


class OpenTransaction:
    """A write transaction from ``SqliteStore.try_begin``: used on one thread, ended on any.

    ``using()`` runs a block on it (there, ``store.read()`` shares it, as inside
    ``transaction()``); ``commit()`` or ``rollback()`` ends it, from whichever thread, and
    exactly one of them must be called. A failed COMMIT rolls back and re-raises.
    """

    def __init__(self, conn: sqlite3.Connection, state: _ThreadState,
                 release: Callable[[], None]) -> None:
        self._conn = conn
        self._state = state
        self._release: Callable[[], None] | None = release

    @contextmanager
    def using(self) -> Iterator[sqlite3.Connection]:
        """This thread's ``read()`` joins the transaction for the block; yields its connection."""
        if self._release is None:
            raise RuntimeError("this transaction has ended")
        state = self._state
        if state.in_transaction or state.read_depth or state.joined is not None:
            raise NestedTransactionError("another transaction or read is open on this thread")
        state.joined = self._conn
        try:
            yield self._conn
        finally:
            state.joined = None

    def commit(self) -> None:
        """COMMIT: the WAL sync happens here; the caller decides on which thread."""
        try:
            self._conn.execute("COMMIT")
        except BaseException:
            rollback_if_open(self._conn)
            raise
        finally:
            self._end()

    def rollback(self) -> None:
        """ROLLBACK (no sync): nothing the block wrote is kept."""
        try:
            rollback_if_open(self._conn)
        finally:
            self._end()

    def _end(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class _OneHost:
    """The leadership of a store that lives on one host: always held."""

    def lead(self) -> bool:
        return True

    def close(self) -> None:
        pass


class SqliteStore(OffLoop):
    """The durable store. ``SqliteStore(path)`` opens or creates the file and migrates it.

    Each thread gets its own connection (SQLite connections must not be shared across
    concurrent threads); ``close()`` closes every one this store opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        migrations: Sequence[tuple[str, ...]] = MIGRATIONS,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> None:
        self._path = os.fspath(path)
        if self._path in ("", ":memory:") or self._path.startswith("file:"):
            raise ValueError(f"store path {self._path!r} must name a file on disk")
        if busy_timeout < 0:
            raise ValueError("busy_timeout must be zero or more seconds")
        self._busy_timeout = busy_timeout
        self._local = _ThreadState()
        self._lock = threading.Lock()
        self._connections: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._closed = False
        self._no_wait: sqlite3.Connection | None = None  # try_begin's own connection
        self._no_wait_taken = threading.Lock()
        try:
            migrate(self._connection(), migrations)
        except BaseException:
            self.close()
            raise

    # -- lifecycle --

    @property
    def path(self) -> str:
        """The file this store opened."""
        return self._path

    def close(self) -> None:
        """Close every connection this store opened, on every thread. Idempotent."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
            no_wait, self._no_wait = self._no_wait, None
        for _, conn in connections:
            conn.close()
        if no_wait is not None:
            no_wait.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SqliteStore({self._path!r})"

    def _is_closed(self) -> bool:
        return self._closed

    def _connection(self) -> sqlite3.Connection:
        if self._closed:
            raise StoreClosedError(f"store {self._path!r} is closed")
        conn = self._local.conn
        if conn is not None:
            return conn
        conn = self._open()
        with self._lock:
            if self._is_closed():  # close() may have run on another thread meanwhile
                conn.close()
                raise StoreClosedError(f"store {self._path!r} is closed")
            # Threads come and go (anyio's worker pool retires idle ones), so a
            # connection whose thread has ended is closed here rather than kept open
            # until close().
            live: list[tuple[threading.Thread, sqlite3.Connection]] = []
            for thread, other in self._connections:
                if thread.is_alive():
                    live.append((thread, other))
                else:
                    other.close()
            live.append((threading.current_thread(), conn))
            self._connections = live
        self._local.conn = conn
        return conn

    def _open(self, busy_timeout: float | None = None) -> sqlite3.Connection:
        # isolation_level=None: autocommit, so Python never issues its own (DEFERRED)
        # BEGIN; every transaction is one we opened. check_same_thread=False so close()
        # can close another thread's connection; each is used by one thread at a time.
        timeout = self._busy_timeout if busy_timeout is None else busy_timeout
        conn = sqlite3.connect(
            self._path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000):d}")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"could not put {self._path!r} in WAL mode")
            # FULL: the WAL is synced at every commit, so a committed reservation,
            # settle or runs row survives a power cut (see docs/STORAGE.md).
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA fullfsync = ON")  # macOS only; a no-op elsewhere
            conn.execute("PRAGMA foreign_keys = ON")
        except BaseException:
            conn.close()
            raise
        return conn

    # -- transactions --

    @contextmanager
    def transaction(self, *, concurrent: bool = False) -> Iterator[sqlite3.Connection]:
        """Run the block in one ``BEGIN IMMEDIATE`` transaction on this thread's connection.

        ``concurrent`` changes nothing here: every transaction on the file is the one
        writer, which is at least what a concurrent one asks for.

        COMMIT when the block returns, ROLLBACK (and re-raise) when it raises. The write
        lock is taken at BEGIN, so the wait for another writer happens there, under
        busy_timeout, and reads inside the block cannot be invalidated by another writer.
        Nesting is refused rather than flattened: an inner block cannot commit or roll back
        on its own, so pretending it could would be a lie about atomicity.
        """
        conn = self._connection()
        state = self._local
        if state.in_transaction or state.joined is not None:
            raise NestedTransactionError("transaction() is already open on this thread")
        if state.read_depth:
            raise NestedTransactionError(
                "transaction() inside read(): finish the read before writing"
            )
        conn.execute("BEGIN IMMEDIATE")
        state.in_transaction = True
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            rollback_if_open(conn)
            raise
        finally:
            state.in_transaction = False

    def try_begin(self) -> OpenTransaction | None:
        """Begin a write transaction at once or not at all: None when it would have to wait.

        For a caller that must not block, the webhook receiver on the event loop: the
        statements are quick once the write lock is held, and the COMMIT (the WAL sync)
        can be moved to a thread when it is slow. The transaction runs on a connection of
        its own with no busy timeout, so None means another connection holds the write
        lock, or this store's one open transaction of this kind has not ended yet; the
        caller then takes the waiting path, ``transaction()`` on a thread.
        """
        if not self._no_wait_taken.acquire(blocking=False):
            return None
        try:
            with self._lock:
                if self._closed:
                    raise StoreClosedError(f"store {self._path!r} is closed")
                if self._no_wait is None:
                    self._no_wait = self._open(busy_timeout=0)
                conn = self._no_wait
            conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self._no_wait_taken.release()
            if isinstance(exc, sqlite3.OperationalError) and is_contention(exc):
                return None
            raise
        return OpenTransaction(conn, self._local, self._no_wait_taken.release)

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A short read-only use of this thread's connection; takes no write lock.

        The block runs in one deferred transaction, so several SELECTs see one snapshot,
        with ``query_only`` on so an accidental write fails instead of upgrading the read
        lock. Keep it short: an open read pins the WAL and holds back checkpoints. Inside
        ``transaction()`` it simply shares the write transaction.
        """
        state = self._local
        if state.joined is not None:
            yield state.joined
            return
        conn = self._connection()
        if state.in_transaction or state.read_depth:
            state.read_depth += 1
            try:
                yield conn
            finally:
                state.read_depth -= 1
            return
        conn.execute("PRAGMA query_only = ON")
        try:
            conn.execute("BEGIN DEFERRED")
            state.read_depth = 1
            try:
                yield conn
            finally:
                state.read_depth = 0
                if conn.in_transaction:
                    conn.execute("COMMIT")
        finally:
            conn.execute("PRAGMA query_only = OFF")

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        """``func(*args)`` on a worker thread (which opens its own connection on first use)."""
        return await anyio.to_thread.run_sync(func, *args)

    def leadership(self, role: str) -> _OneHost:
        """On one file every process leads: they share one host, and what they would
        duplicate (a poll cycle) is idempotent."""
        return _OneHost()

    @property
    def in_process(self) -> bool:
        """True: SQLite runs in this process."""
        return True

    @property
    def skip_locked(self) -> str:
        """Nothing: with one writer at a time no row is ever locked by another."""
        return ""

    def lock(self, tx: Transaction, name: str) -> None:
        """Nothing to wait for: the transaction already is the only writer."""

    def try_lock(self, tx: Transaction, name: str) -> bool:
        """Always taken: the transaction already is the only writer."""
        return True

    def change_marker(self, tx: Transaction) -> Hashable:
        """This connection, its own changes so far, and ``PRAGMA data_version`` (which moves
        when another connection commits)."""
        conn = cast(sqlite3.Connection, tx)
        (data_version,) = conn.execute("PRAGMA data_version").fetchone()
        return (conn, data_version, conn.total_changes)

    @property
    def head_version(self) -> int:
        """The schema version this code writes on SQLite."""
        return HEAD_VERSION

    @property
    def version(self) -> int:
        """The file's schema version (``PRAGMA user_version``)."""
        with self.read() as conn:
            return user_version(conn)
