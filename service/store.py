"""The SQLite store: one file, in WAL mode, holding everything that must survive a restart.

The schema is declared here and nowhere else, as one ordered list of migrations whose
count is the file's ``PRAGMA user_version``. Every write goes through ``transaction()``,
which takes the write lock up front with ``BEGIN IMMEDIATE``: that is what makes a
read-then-write sequence (a queue claim and the budget reservation it spends) atomic
against every other connection, thread or process on the same file.

Times are stored as text in one fixed-width form (``to_db_time``) so that comparing two
of them as strings in SQL is the same as comparing the instants.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Final

from service.etags import Validators, resource_of
from service.migrations import MIGRATIONS

__all__ = [
    "HEAD_VERSION",
    "MIGRATIONS",
    "MigrationError",
    "NestedTransactionError",
    "SqliteStore",
    "StoreClosedError",
    "from_db_time",
    "is_contention",
    "migrate",
    "to_db_time",
    "watermark_key",
]

logger = logging.getLogger(__name__)

# The schema lives in service/migrations.py; this module applies it.

HEAD_VERSION: Final = len(MIGRATIONS)
"""The schema version this code writes: how many migrations it knows."""

DEFAULT_BUSY_TIMEOUT: Final = 5.0
"""Seconds a connection waits for another's write lock before SQLite gives up."""

# SQLite's primary result codes for "someone else holds the lock"; extended codes
# (SQLITE_BUSY_SNAPSHOT, SQLITE_BUSY_RECOVERY, SQLITE_LOCKED_SHAREDCACHE, ...) carry
# the primary code in their low byte.
_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6
_CONTENTION_MESSAGES: Final = (
    "database is locked",
    "database table is locked",
    "database schema is locked",
)

_LEGACY_STREAMS: Final = ("pull_requests", "comments")
_REPO = re.compile(r"[^/\s:]+/[^/\s:]+")
_STREAM = re.compile(r"[A-Za-z0-9_]+")


class MigrationError(RuntimeError):
    """A migration could not be applied; the file is left at the version it had before it."""


class NestedTransactionError(RuntimeError):
    """``transaction()`` was entered on a thread already inside one (or inside ``read()``)."""


class StoreClosedError(RuntimeError):
    """The store was used after ``close()``."""


# -- times ---------------------------------------------------------------------------------


def to_db_time(dt: datetime) -> str:
    """The stored form of an aware instant: UTC, ISO-8601, microseconds, fixed width.

    Always 32 characters, e.g. ``2026-01-02T03:04:05.123456+00:00``, so string order in
    SQL is time order. A naive datetime is a ``ValueError``: it names no instant.
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"expected a datetime, got {type(dt).__name__}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"naive datetime {dt.isoformat()} refused: stored times must be aware")
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


def from_db_time(text: str) -> datetime:
    """Parse a stored time back to an aware UTC datetime.

    Accepts any ISO-8601 form with an offset (``Z`` included), so rows written by older
    code in a shorter form still read; a value without an offset is a ``ValueError``.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected a stored time string, got {type(text).__name__}")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"stored time {text!r} has no UTC offset")
    return parsed.astimezone(UTC)


# -- errors --------------------------------------------------------------------------------


def is_contention(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite giving up on a lock wait, False for a genuine fault.

    The poll loop skips a cycle for the first and crashes for the second. Explicitly
    chained causes (``raise ... from exc``, as ``MigrationError`` does) are followed.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
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


# -- migrations ----------------------------------------------------------------------------


def _user_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def _rollback_if_open(conn: sqlite3.Connection) -> None:
    # A failing statement may already have ended the transaction (SQLite rolls back on
    # some errors by itself); ROLLBACK with none open would mask the original error.
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
    version = _user_version(conn)
    while True:
        if version > head:
            raise MigrationError(
                f"store is at schema version {version}, newer than this code's {head}; "
                "refusing to run against it"
            )
        if version == head:
            return version
        target = version + 1
        try:
            conn.execute("BEGIN IMMEDIATE")
            current = _user_version(conn)
            if current == version:
                for statement in migrations[version]:
                    conn.execute(statement)
                # PRAGMA takes no bound parameters; target is an int we computed.
                conn.execute(f"PRAGMA user_version = {target:d}")
                current = target
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            _rollback_if_open(conn)
            raise MigrationError(f"migration {target} failed: {exc}") from exc
        except BaseException:
            _rollback_if_open(conn)
            raise
        if current == target:
            logger.info("store migrated", extra={"schema_version": target})
        version = current


# -- keys ----------------------------------------------------------------------------------


def watermark_key(stream: str, repo: str) -> str:
    """The watermark name for ``stream`` on ``repo``: ``watermark_key("comments", "o/r")``
    is ``"comments:o/r"``."""
    if not _STREAM.fullmatch(stream):
        raise ValueError(f"watermark stream {stream!r} must be letters, digits or '_'")
    if not _REPO.fullmatch(repo):
        raise ValueError(f"repository {repo!r} must be 'owner/name'")
    return f"{stream}:{repo}"


def _check_watermark_name(name: str) -> None:
    stream, sep, repo = name.partition(":")
    if not sep or not _STREAM.fullmatch(stream) or not _REPO.fullmatch(repo):
        raise ValueError(
            f"watermark name {name!r} must be '<stream>:<owner>/<name>' (see watermark_key)"
        )


# -- the store -----------------------------------------------------------------------------


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
            _rollback_if_open(self._conn)
            raise
        finally:
            self._end()

    def rollback(self) -> None:
        """ROLLBACK (no sync): nothing the block wrote is kept."""
        try:
            _rollback_if_open(self._conn)
        finally:
            self._end()

    def _end(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


class SqliteStore:
    """The durable store. ``SqliteStore(path)`` opens or creates the file and migrates it.

    Each thread gets its own connection (SQLite connections must not be shared across
    concurrent threads); ``close()`` closes every one this store opened. Also the durable
    ``ETagCache``.
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
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run the block in one ``BEGIN IMMEDIATE`` transaction on this thread's connection.

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
            _rollback_if_open(conn)
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

    @property
    def version(self) -> int:
        """The file's schema version (``PRAGMA user_version``)."""
        with self.read() as conn:
            return _user_version(conn)

    # -- watermarks --

    def get_watermark(self, name: str) -> datetime | None:
        """The watermark stored under ``name`` (``"<stream>:<owner>/<name>"``), or None."""
        _check_watermark_name(name)
        with self.read() as conn:
            row = conn.execute("SELECT at FROM watermarks WHERE name = ?", (name,)).fetchone()
        return None if row is None else from_db_time(row[0])

    def advance_watermark(self, name: str, at: datetime) -> datetime:
        """Store the later of the stored and the offered time; return the one in force.

        Compared as instants in Python under the write lock rather than as strings in SQL,
        so a row written by older code in another ISO form still compares correctly.
        """
        _check_watermark_name(name)
        offered = to_db_time(at)  # rejects a naive datetime before any I/O
        with self.transaction() as conn:
            row = conn.execute("SELECT at FROM watermarks WHERE name = ?", (name,)).fetchone()
            if row is not None:
                stored = from_db_time(row[0])
                if stored >= from_db_time(offered):
                    return stored
            conn.execute(
                "INSERT INTO watermarks (name, at) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET at = excluded.at",
                (name, offered),
            )
        return from_db_time(offered)

    def adopt_legacy_watermarks(self, repo: str) -> bool:
        """Move unqualified ``pull_requests`` / ``comments`` rows onto ``repo``'s keys.

        Once per store: the unqualified rows are deleted in the same transaction, so a
        second repository later pointed at this file inherits nothing. Where a qualified
        row already exists the later time wins. Returns whether any legacy row was found.
        """
        keys = {stream: watermark_key(stream, repo) for stream in _LEGACY_STREAMS}
        adopted: dict[str, str] = {}
        with self.transaction() as conn:
            for stream, key in keys.items():
                row = conn.execute("SELECT at FROM watermarks WHERE name = ?", (stream,)).fetchone()
                if row is None:
                    continue
                legacy = from_db_time(row[0])
                current = conn.execute(
                    "SELECT at FROM watermarks WHERE name = ?", (key,)
                ).fetchone()
                if current is None or from_db_time(current[0]) < legacy:
                    conn.execute(
                        "INSERT INTO watermarks (name, at) VALUES (?, ?)"
                        " ON CONFLICT (name) DO UPDATE SET at = excluded.at",
                        (key, to_db_time(legacy)),
                    )
                conn.execute("DELETE FROM watermarks WHERE name = ?", (stream,))
                adopted[stream] = to_db_time(legacy)
        if adopted:
            logger.info("adopted legacy watermarks", extra={"repo": repo, "watermarks": adopted})
        return bool(adopted)

    # -- ETags (the ETagCache protocol) --

    def get_validators(self, key: str) -> Validators | None:
        """The validators last stored for ``key``, or None."""
        with self.read() as conn:
            row = conn.execute(
                "SELECT etag, last_modified FROM etags WHERE path = ?", (key,)
            ).fetchone()
        return None if row is None else Validators(etag=row[0], last_modified=row[1])

    def put_validators(self, key: str, validators: Validators) -> None:
        """Store (or replace) the validators for ``key``, dropping its other variants.

        Variants are keys for the same resource with another suffix after the last ``#``
        (another token's fingerprint; see ``service.etags``).
        """
        resource = resource_of(key)
        with self.transaction() as conn:
            if resource != key:
                # '$' follows '#': every key that starts with "<resource>#".
                conn.execute(
                    "DELETE FROM etags WHERE path >= ? AND path < ? AND path != ?",
                    (resource + "#", resource + "$", key),
                )
            conn.execute(
                "INSERT INTO etags (path, etag, last_modified) VALUES (?, ?, ?)"
                " ON CONFLICT (path) DO UPDATE"
                " SET etag = excluded.etag, last_modified = excluded.last_modified",
                (key, validators.etag, validators.last_modified),
            )
