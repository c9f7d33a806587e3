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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from types import TracebackType
from typing import Final

from service.etags import Validators, resource_of

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

# -- schema --------------------------------------------------------------------------------
#
# One entry per schema version, in order; entry n-1 takes a file from version n-1 to n.
# Each entry is a tuple of single statements (never a script: executescript() issues a
# COMMIT of its own, which would split a migration from its version bump). Entries are
# append-only: a released migration is never edited, a change is a new entry.
# CREATEs say IF NOT EXISTS because a file written before this list existed carries
# version 1's tables at user_version 0 and must adopt them.

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1: ETags and watermarks.
    (
        "CREATE TABLE IF NOT EXISTS etags (path TEXT PRIMARY KEY, etag TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS watermarks (name TEXT PRIMARY KEY, at TEXT NOT NULL)",
    ),
    # 2: the queue.
    (
        "CREATE TABLE IF NOT EXISTS queue ("
        "dedupe_key TEXT PRIMARY KEY, kind TEXT NOT NULL, repo TEXT NOT NULL,"
        " pr_number INTEGER NOT NULL, head_sha TEXT, actor_id INTEGER NOT NULL,"
        " status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
        " enqueued_at TEXT NOT NULL, leased_until TEXT, owner TEXT)",
    ),
    # 3: the ledger, and the index every rolling-window sum reads.
    (
        "CREATE TABLE IF NOT EXISTS ledger ("
        "id INTEGER PRIMARY KEY AUTOINCREMENT, dedupe_key TEXT NOT NULL,"
        " owner TEXT NOT NULL, actor_id INTEGER NOT NULL, mode TEXT NOT NULL,"
        " reserved_tokens INTEGER NOT NULL, used_tokens INTEGER, usage_confidence TEXT,"
        " engine TEXT, model TEXT, reserved_at TEXT NOT NULL, settled_at TEXT)",
        "CREATE INDEX IF NOT EXISTS ledger_window ON ledger (reserved_at)",
    ),
    # 4: the per-contributor window.
    ("CREATE INDEX IF NOT EXISTS ledger_actor_window ON ledger (actor_id, reserved_at)",),
    # 5: what the pre-flight estimate is fitted against.
    ("ALTER TABLE ledger ADD COLUMN reviewed_lines INTEGER",),
    # 6: why a run ended.
    ("ALTER TABLE ledger ADD COLUMN stop_reason TEXT",),
    # 7: the comment a mention came from, and which endpoint it was on.
    (
        "ALTER TABLE queue ADD COLUMN comment_id INTEGER",
        "ALTER TABLE queue ADD COLUMN comment_source TEXT",
    ),
    # 8: runs, the only table holding review content.
    (
        "CREATE TABLE IF NOT EXISTS runs ("
        "dedupe_key TEXT PRIMARY KEY, repo TEXT NOT NULL, pr_number INTEGER NOT NULL,"
        " head_sha TEXT NOT NULL, outcome TEXT NOT NULL, findings TEXT NOT NULL,"
        " comment_id INTEGER, recorded_at TEXT NOT NULL, published_at TEXT,"
        " content_purged_at TEXT)",
    ),
    # 9: the circuit breaker's scalars.
    ("CREATE TABLE IF NOT EXISTS budget_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)",),
    # 10: the one shared budget policy.
    (
        "CREATE TABLE IF NOT EXISTS budget_policy ("
        "id INTEGER PRIMARY KEY CHECK (id = 1), authority_repo TEXT NOT NULL,"
        " policy TEXT NOT NULL, written_at TEXT NOT NULL)",
    ),
    # 11: the pull request a ledger row paid for, and the pacer's index.
    (
        "ALTER TABLE ledger ADD COLUMN repo TEXT",
        "ALTER TABLE ledger ADD COLUMN pr_number INTEGER",
        "CREATE INDEX IF NOT EXISTS ledger_pull_request ON ledger (repo, pr_number, reserved_at)",
    ),
    # 12: how publication ended.
    ("ALTER TABLE runs ADD COLUMN publish_outcome TEXT",),
    # 13: publication retries, and giving up.
    (
        "ALTER TABLE runs ADD COLUMN publish_attempts INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN publish_failed_at TEXT",
    ),
    # 14: what the agent itself posted.
    (
        "CREATE TABLE IF NOT EXISTS agent_comments ("
        "repo TEXT NOT NULL, comment_id INTEGER NOT NULL, posted_at TEXT NOT NULL,"
        " PRIMARY KEY (repo, comment_id))",
    ),
    # 15: one open reservation per trigger. The cleanup must come first and in the same
    # transaction: the unique index cannot be built over duplicates, and a crash between
    # the two must not leave duplicates without the index. Every older open row for a
    # key is closed as lost at exactly the charge it was carrying (its reservation), at
    # its own reserved_at; the newest (highest id) stays open for its worker to settle.
    (
        "UPDATE ledger"
        " SET used_tokens = COALESCE(used_tokens, reserved_tokens),"
        " usage_confidence = 'unavailable', stop_reason = 'lost', settled_at = reserved_at"
        " WHERE settled_at IS NULL AND EXISTS (SELECT 1 FROM ledger AS newer"
        " WHERE newer.dedupe_key = ledger.dedupe_key AND newer.settled_at IS NULL"
        " AND newer.id > ledger.id)",
        "CREATE UNIQUE INDEX IF NOT EXISTS ledger_open ON ledger (dedupe_key)"
        " WHERE settled_at IS NULL",
    ),
    # 16: the head an incremental round diffed from.
    ("ALTER TABLE ledger ADD COLUMN reviewed_since TEXT",),
    # 17: what excluded_paths withheld.
    ("ALTER TABLE runs ADD COLUMN omitted TEXT NOT NULL DEFAULT '[]'",),
    # 18: the review's overall assessment.
    ("ALTER TABLE runs ADD COLUMN assessment TEXT",),
    # 19: @claude describe.
    (
        "ALTER TABLE queue ADD COLUMN command TEXT NOT NULL DEFAULT 'review'",
        "ALTER TABLE runs ADD COLUMN description TEXT",
    ),
    # 20 onwards are the App's own. 20: webhook deliveries, keyed by X-GitHub-Delivery.
    (
        "CREATE TABLE IF NOT EXISTS deliveries ("
        "delivery_id TEXT PRIMARY KEY, event TEXT NOT NULL, action TEXT,"
        " installation_id INTEGER, received_at TEXT NOT NULL, outcome TEXT NOT NULL)",
    ),
    # 21: the repositories the App is installed on.
    (
        "CREATE TABLE IF NOT EXISTS repositories ("
        "repo TEXT PRIMARY KEY, installation_id INTEGER NOT NULL,"
        " added_at TEXT NOT NULL, removed_at TEXT)",
    ),
    # 22: Last-Modified beside the ETag (service.etags.Validators).
    ("ALTER TABLE etags ADD COLUMN last_modified TEXT",),
    # 23: the claim's indexes. queue_live holds only rows a claim may take, in FIFO
    # order, so the walk reads no done rows and needs no sort; its WHERE must stay the
    # text queue.py derives from its lifecycle table ("claim" sources) or the planner
    # cannot use it. queue_leases answers "does this pull request hold a live lease?".
    (
        "CREATE INDEX IF NOT EXISTS queue_live ON queue (enqueued_at, dedupe_key)"
        " WHERE status IN ('pending', 'claimed')",
        "CREATE INDEX IF NOT EXISTS queue_leases"
        " ON queue (repo, pr_number, status, leased_until)",
    ),
    # 24: hourly charge totals, kept by triggers on every ledger write so that no
    # writer (the governor, a migration, an operator's UPDATE) can forget them. A window
    # is then the sum of its whole hours plus the raw rows of its first, partial hour:
    # the same number as SUM(COALESCE(used_tokens, reserved_tokens)) over its rows, at
    # a cost that does not grow with the ledger. An hour is the first 13 characters of
    # the fixed-width UTC time (YYYY-MM-DDTHH).
    (
        "CREATE TABLE IF NOT EXISTS ledger_hours ("
        "hour TEXT PRIMARY KEY, charged INTEGER NOT NULL)",
        "INSERT INTO ledger_hours (hour, charged)"
        " SELECT substr(reserved_at, 1, 13), SUM(COALESCE(used_tokens, reserved_tokens))"
        " FROM ledger GROUP BY substr(reserved_at, 1, 13)",
        "CREATE TRIGGER IF NOT EXISTS ledger_hours_insert AFTER INSERT ON ledger BEGIN"
        " INSERT INTO ledger_hours (hour, charged)"
        " VALUES (substr(NEW.reserved_at, 1, 13),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens))"
        " ON CONFLICT (hour) DO UPDATE SET charged = charged + excluded.charged; END",
        "CREATE TRIGGER IF NOT EXISTS ledger_hours_update"
        " AFTER UPDATE OF used_tokens, reserved_tokens, reserved_at ON ledger BEGIN"
        " UPDATE ledger_hours"
        " SET charged = charged - COALESCE(OLD.used_tokens, OLD.reserved_tokens)"
        " WHERE hour = substr(OLD.reserved_at, 1, 13);"
        " INSERT INTO ledger_hours (hour, charged)"
        " VALUES (substr(NEW.reserved_at, 1, 13),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens))"
        " ON CONFLICT (hour) DO UPDATE SET charged = charged + excluded.charged; END",
        "CREATE INDEX IF NOT EXISTS ledger_open_window ON ledger (reserved_at)"
        " WHERE settled_at IS NULL",
        "CREATE TRIGGER IF NOT EXISTS ledger_hours_delete AFTER DELETE ON ledger BEGIN"
        " UPDATE ledger_hours"
        " SET charged = charged - COALESCE(OLD.used_tokens, OLD.reserved_tokens)"
        " WHERE hour = substr(OLD.reserved_at, 1, 13); END",
    ),    # 25: pull requests seen closing (webhook or poll), for cancellation and the
    # retention sweep; and agent_comments looked up by id alone (ids are global on
    # GitHub, and the trigger rules ask "is this comment ours?" without a repository).
    (
        "CREATE TABLE IF NOT EXISTS closed_pull_requests ("
        "repo TEXT NOT NULL, pr_number INTEGER NOT NULL, merged INTEGER NOT NULL,"
        " closed_at TEXT NOT NULL, purged_at TEXT, PRIMARY KEY (repo, pr_number))",
        "CREATE INDEX IF NOT EXISTS agent_comments_id ON agent_comments (comment_id)",
    ),
    # 26: what each run cost in dollars, as the engine reported it (NULL: not reported),
    # and hourly totals of the rows that have a cost, kept by triggers in the shape of
    # migration 24, so that the trailing 30-day dollar window is read from at most 720
    # hourly rows at every claim instead of a month of ledger rows. Dollars are summed
    # as whole micro-dollars: integer totals never drift under repeated add/subtract.
    (
        "ALTER TABLE ledger ADD COLUMN cost_usd REAL",
        "CREATE TABLE IF NOT EXISTS ledger_cost_hours ("
        "hour TEXT PRIMARY KEY, micro_usd INTEGER NOT NULL, tokens INTEGER NOT NULL,"
        " runs INTEGER NOT NULL)",
        "CREATE TRIGGER IF NOT EXISTS ledger_cost_hours_insert AFTER INSERT ON ledger"
        " WHEN NEW.cost_usd IS NOT NULL BEGIN"
        " INSERT INTO ledger_cost_hours (hour, micro_usd, tokens, runs)"
        " VALUES (substr(NEW.reserved_at, 1, 13),"
        " CAST(round(NEW.cost_usd * 1000000) AS INTEGER),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens), 1)"
        " ON CONFLICT (hour) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd,"
        " tokens = tokens + excluded.tokens, runs = runs + excluded.runs; END",
        "CREATE TRIGGER IF NOT EXISTS ledger_cost_hours_update"
        " AFTER UPDATE OF cost_usd, used_tokens, reserved_tokens, reserved_at ON ledger"
        " WHEN OLD.cost_usd IS NOT NULL OR NEW.cost_usd IS NOT NULL BEGIN"
        " UPDATE ledger_cost_hours"
        " SET micro_usd = micro_usd - CAST(round(OLD.cost_usd * 1000000) AS INTEGER),"
        " tokens = tokens - COALESCE(OLD.used_tokens, OLD.reserved_tokens), runs = runs - 1"
        " WHERE hour = substr(OLD.reserved_at, 1, 13) AND OLD.cost_usd IS NOT NULL;"
        " INSERT INTO ledger_cost_hours (hour, micro_usd, tokens, runs)"
        " SELECT substr(NEW.reserved_at, 1, 13),"
        " CAST(round(NEW.cost_usd * 1000000) AS INTEGER),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens), 1 WHERE NEW.cost_usd IS NOT NULL"
        " ON CONFLICT (hour) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd,"
        " tokens = tokens + excluded.tokens, runs = runs + excluded.runs; END",
        "CREATE TRIGGER IF NOT EXISTS ledger_cost_hours_delete AFTER DELETE ON ledger"
        " WHEN OLD.cost_usd IS NOT NULL BEGIN"
        " UPDATE ledger_cost_hours"
        " SET micro_usd = micro_usd - CAST(round(OLD.cost_usd * 1000000) AS INTEGER),"
        " tokens = tokens - COALESCE(OLD.used_tokens, OLD.reserved_tokens), runs = runs - 1"
        " WHERE hour = substr(OLD.reserved_at, 1, 13); END",
    ),
    # 27: the publisher's own record. notices holds at most one notice per trigger (the
    # primary key is the rule), written before the post so that two passes cannot both
    # post; runs.publish_lease_until keeps two processes from publishing one run at once
    # (a crashed attempt's lease lapses and the run is offered again); the two partial
    # indexes serve the re-offer scan (runs still to publish) and the retention sweep
    # (runs whose content is still held), so neither reads the whole table.
    (
        "CREATE TABLE IF NOT EXISTS notices ("
        "dedupe_key TEXT PRIMARY KEY, kind TEXT NOT NULL, comment_id INTEGER,"
        " posted_at TEXT NOT NULL)",
        "ALTER TABLE runs ADD COLUMN publish_lease_until TEXT",
        "CREATE INDEX IF NOT EXISTS runs_unpublished ON runs (recorded_at)"
        " WHERE publish_outcome IS NULL AND publish_failed_at IS NULL"
        " AND content_purged_at IS NULL",
        "CREATE INDEX IF NOT EXISTS runs_unpurged ON runs (repo, pr_number)"
        " WHERE content_purged_at IS NULL",
    ),
)

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
        for _, conn in connections:
            conn.close()

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

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: autocommit, so Python never issues its own (DEFERRED)
        # BEGIN; every transaction is one we opened. check_same_thread=False only so
        # close() can close another thread's connection: each is used by one thread.
        conn = sqlite3.connect(
            self._path,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout * 1000):d}")
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
        if state.in_transaction:
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

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A short read-only use of this thread's connection; takes no write lock.

        The block runs in one deferred transaction, so several SELECTs see one snapshot,
        with ``query_only`` on so an accidental write fails instead of upgrading the read
        lock. Keep it short: an open read pins the WAL and holds back checkpoints. Inside
        ``transaction()`` it simply shares the write transaction.
        """
        conn = self._connection()
        state = self._local
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
