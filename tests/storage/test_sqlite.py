"""The SQLite store: its connections, transactions and contention test."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from service.storage.errors import (
    MigrationError,
    NestedTransactionError,
    StoreClosedError,
    is_contention,
)
from service.storage.migrations import MIGRATIONS
from service.storage.sqlite import HEAD_VERSION, SqliteStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "state.db") as opened:
        with opened.transaction() as conn:
            conn.execute("CREATE TABLE t (n INTEGER)")
        yield opened


def count(store: SqliteStore) -> int:
    with store.read() as conn:
        return int(conn.execute("SELECT COUNT(*) FROM t").fetchone()[0])


def in_thread(fn: Callable[[], object]) -> None:
    """Run ``fn`` on a fresh thread and re-raise whatever it raised."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if errors:
        raise errors[0]


# -- connections ----------------------------------------------------------------------------


def test_pragmas_on_every_thread(store: SqliteStore) -> None:
    def check() -> None:
        with store.read() as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
            assert conn.isolation_level is None

    check()
    in_thread(check)


def test_one_connection_per_thread_and_close_closes_them_all(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    seen: list[sqlite3.Connection] = []
    release = threading.Event()
    opened = threading.Barrier(4)

    def hold() -> None:
        with store.read() as first, store.read() as again:
            assert first is again
            seen.append(first)
        opened.wait()
        release.wait()

    threads = [threading.Thread(target=hold) for _ in range(3)]
    for t in threads:
        t.start()
    opened.wait()
    with store.read() as mine:
        seen.append(mine)
    assert len({id(c) for c in seen}) == 4

    store.close()
    release.set()
    for t in threads:
        t.join()
    for conn in seen:
        with pytest.raises(sqlite3.ProgrammingError):
            conn.execute("SELECT 1")
    with pytest.raises(StoreClosedError):
        _ = store.version
    with pytest.raises(StoreClosedError), store.transaction():
        pass
    store.close()  # idempotent


def test_a_finished_threads_connection_is_closed_when_another_opens(store: SqliteStore) -> None:
    seen: list[sqlite3.Connection] = []

    def use() -> None:
        with store.read() as conn:
            seen.append(conn)

    in_thread(use)
    in_thread(use)  # opening this one closes the first, whose thread has ended
    with pytest.raises(sqlite3.ProgrammingError):
        seen[0].execute("SELECT 1")
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        seen[1].execute("SELECT 1")


@pytest.mark.parametrize("bad", ["", ":memory:", "file:x.db?mode=memory"])
def test_a_store_must_be_a_file(bad: str) -> None:
    with pytest.raises(ValueError, match="file on disk"):
        SqliteStore(bad)


# -- transactions ---------------------------------------------------------------------------


def test_transaction_commits_on_success(store: SqliteStore) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("INSERT INTO t VALUES (2)")
    in_thread(lambda: assert_count(store, 2))


def assert_count(store: SqliteStore, expected: int) -> None:
    assert count(store) == expected


def test_transaction_rolls_back_and_reraises(store: SqliteStore) -> None:
    class Boom(Exception):
        pass

    def insert_then_fail() -> None:
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            raise Boom

    with pytest.raises(Boom):
        insert_then_fail()
    assert count(store) == 0
    with store.transaction() as conn:  # the connection is usable again
        conn.execute("INSERT INTO t VALUES (1)")
    assert count(store) == 1


def test_a_failing_statement_rolls_back_the_whole_block(store: SqliteStore) -> None:
    def insert_then_fault() -> None:
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            conn.execute("INSERT INTO missing VALUES (1)")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        insert_then_fault()
    assert count(store) == 0


def test_nested_transactions_are_refused(store: SqliteStore) -> None:
    def nest() -> None:
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
            with store.transaction():
                pass

    with pytest.raises(NestedTransactionError, match="already open"):
        nest()
    assert count(store) == 0  # the outer block saw the error and rolled back
    with pytest.raises(NestedTransactionError, match="inside read"), store.read():
        with store.transaction():
            pass


def test_transaction_takes_the_write_lock_at_begin(store: SqliteStore, tmp_path: Path) -> None:
    other = sqlite3.connect(tmp_path / "state.db", timeout=0, isolation_level=None)
    try:
        with store.transaction():
            # Nothing written yet, and still no other writer may start.
            with pytest.raises(sqlite3.OperationalError) as info:
                other.execute("BEGIN IMMEDIATE")
            assert is_contention(info.value)
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


def test_read_then_write_is_atomic_across_threads(store: SqliteStore) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (0)")
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(25):
                with store.transaction() as conn:
                    (n,) = conn.execute("SELECT n FROM t").fetchone()
                    conn.execute("UPDATE t SET n = ?", (n + 1,))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with store.read() as conn:
        assert conn.execute("SELECT n FROM t").fetchone()[0] == 150


def test_read_does_not_wait_for_a_writer_and_cannot_write(
    store: SqliteStore, tmp_path: Path
) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    writer = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("INSERT INTO t VALUES (2)")
        assert count(store) == 1  # no wait, and the uncommitted row is invisible
        writer.execute("COMMIT")
    finally:
        writer.close()

    with pytest.raises(sqlite3.OperationalError, match="readonly") as info, store.read() as conn:
        conn.execute("INSERT INTO t VALUES (3)")
    assert not is_contention(info.value)
    with store.transaction() as conn:  # query_only is lifted after the read
        conn.execute("INSERT INTO t VALUES (3)")
    assert count(store) == 3


def test_read_inside_a_transaction_sees_its_writes(store: SqliteStore) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        assert count(store) == 1
        conn.execute("INSERT INTO t VALUES (2)")  # still writable after the inner read
    assert count(store) == 2


# -- contention -----------------------------------------------------------------------------

HOLD_LOCK = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
conn.close()
"""


def test_contention_with_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with SqliteStore(path, busy_timeout=0.05) as store:
            with pytest.raises(sqlite3.OperationalError) as info, store.transaction():
                pass
            assert is_contention(info.value)
            assert store.version == HEAD_VERSION  # reads still work under the lock
        holder.execute("ROLLBACK")
    finally:
        holder.close()


def test_contention_with_another_process(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path, migrations=MIGRATIONS[:5]).close()
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stdin is not None
        try:
            assert proc.stdout.readline().strip() == "locked"
            with SqliteStore(path, migrations=MIGRATIONS[:5], busy_timeout=0.05) as store:
                with pytest.raises(sqlite3.OperationalError) as info, store.transaction():
                    pass
                assert is_contention(info.value)
            # A migration that cannot get the lock fails as contention, not as a fault.
            with pytest.raises(MigrationError) as failed:
                SqliteStore(path, busy_timeout=0.05)
            assert is_contention(failed.value)
        finally:
            proc.stdin.write("\n")
            proc.stdin.flush()
        assert proc.wait(timeout=10) == 0
    with SqliteStore(path) as store:
        assert store.version == HEAD_VERSION


def test_table_lock_is_contention(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    try:
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,)])
        cursor = conn.execute("SELECT n FROM t")
        cursor.fetchone()  # a statement still reading t
        with pytest.raises(sqlite3.OperationalError, match="table is locked") as info:
            conn.execute("DROP TABLE t")
        assert is_contention(info.value)
        cursor.close()
    finally:
        conn.close()


def real_error(sql: str, path: Path, *, uri: bool = False) -> sqlite3.Error:
    conn = sqlite3.connect(f"file:{path}?mode=ro" if uri else path, uri=uri)
    try:
        conn.execute(sql)
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError(f"{sql!r} did not fail")


def test_real_faults_are_not_contention(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()
    faults: list[BaseException] = [
        real_error("SELECT * FROM no_such_table", path),
        real_error("SELEC 1", path),
        real_error("INSERT INTO etags VALUES ('k', 'e', NULL)", path, uri=True),  # readonly
        real_error("INSERT INTO etags (path) VALUES ('k')", path),  # NOT NULL
        sqlite3.OperationalError("disk I/O error"),
        sqlite3.OperationalError("unable to open database file"),
        ValueError("database is locked"),  # right words, wrong kind of error
        MigrationError("migration 3 failed: no such table: x"),
    ]
    for fault in faults:
        assert not is_contention(fault), fault
    assert "readonly" in str(faults[2])


def test_contention_by_message_when_no_code_is_attached() -> None:
    assert is_contention(sqlite3.OperationalError("database is locked"))
    assert is_contention(sqlite3.OperationalError("database table is locked: queue"))
    wrapped = MigrationError("migration 4 failed")
    wrapped.__cause__ = sqlite3.OperationalError("database is locked")
    assert is_contention(wrapped)
