"""``SqliteStore.try_begin``: a write transaction begun without waiting, ended on any thread."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.storage.errors import NestedTransactionError, StoreClosedError
from service.storage.migrations import MIGRATIONS
from service.storage.sqlite import SqliteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "state.db", busy_timeout=30) as opened:
        with opened.transaction() as conn:
            conn.execute("CREATE TABLE t (n INTEGER)")
        yield opened


def visible(store: SqliteStore) -> list[int]:
    """What another connection sees: only committed rows."""
    with sqlite3.connect(store.path) as other:
        return [int(r[0]) for r in other.execute("SELECT n FROM t ORDER BY n")]


def test_rows_written_on_one_thread_are_committed_from_another(store: SqliteStore) -> None:
    transaction = store.try_begin()
    assert transaction is not None
    with transaction.using() as conn:
        conn.execute("INSERT INTO t VALUES (1), (2)")
    assert visible(store) == []  # written, not committed

    committer = threading.Thread(target=transaction.commit)
    committer.start()
    committer.join(5)

    assert visible(store) == [1, 2]
    again = store.try_begin()  # the store's no-wait transaction is free again
    assert again is not None
    again.rollback()


def test_it_does_not_wait_while_another_connection_holds_the_write_lock(
        store: SqliteStore) -> None:
    holding, done = threading.Event(), threading.Event()

    def hold() -> None:
        with store.transaction() as conn:
            conn.execute("INSERT INTO t VALUES (9)")
            holding.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(5)
    answers: list[object] = []
    asker = threading.Thread(target=lambda: answers.append(store.try_begin()))
    asker.start()
    asker.join(3)  # the store's busy timeout is 30 s: only a no-wait begin returns here
    done.set()
    holder.join(5)

    assert answers == [None]
    assert visible(store) == [9]


def test_only_one_is_open_at_a_time(store: SqliteStore) -> None:
    first = store.try_begin()
    assert first is not None
    assert store.try_begin() is None
    first.commit()
    second = store.try_begin()
    assert second is not None
    second.rollback()


def test_rollback_keeps_nothing(store: SqliteStore) -> None:
    transaction = store.try_begin()
    assert transaction is not None
    with transaction.using() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    transaction.rollback()

    assert visible(store) == []
    with store.transaction() as conn:  # the write lock was released
        conn.execute("INSERT INTO t VALUES (2)")
    assert visible(store) == [2]


def test_reads_on_the_thread_using_it_see_its_writes(store: SqliteStore) -> None:
    transaction = store.try_begin()
    assert transaction is not None
    with transaction.using() as conn:
        conn.execute("INSERT INTO t VALUES (5)")
        with store.read() as reader:
            assert [r[0] for r in reader.execute("SELECT n FROM t")] == [5]
        with pytest.raises(NestedTransactionError):
            with store.transaction():
                pass
    with store.read() as reader:  # the block is over: back to this thread's own snapshot
        assert list(reader.execute("SELECT n FROM t")) == []
    transaction.rollback()


def test_it_cannot_be_used_inside_another_block_or_after_it_ended(store: SqliteStore) -> None:
    transaction = store.try_begin()
    assert transaction is not None
    with store.read():
        with pytest.raises(NestedTransactionError):
            with transaction.using():
                pass
    transaction.commit()
    with pytest.raises(RuntimeError, match="ended"):
        with transaction.using():
            pass
    transaction.rollback()  # ending it twice does nothing more


def test_a_commit_that_fails_rolls_back_and_frees_the_store(tmp_path: Path) -> None:
    # A deferred foreign key is checked at COMMIT: a real COMMIT that fails.
    tables = ("CREATE TABLE parent (id INTEGER PRIMARY KEY)",
              "CREATE TABLE child (parent INTEGER REFERENCES parent (id)"
              " DEFERRABLE INITIALLY DEFERRED)")
    with SqliteStore(tmp_path / "fk.db", migrations=[*MIGRATIONS, tables]) as store:
        transaction = store.try_begin()
        assert transaction is not None
        with transaction.using() as conn:
            conn.execute("INSERT INTO child VALUES (7)")
        with pytest.raises(sqlite3.IntegrityError):
            transaction.commit()

        with store.read() as conn:
            assert list(conn.execute("SELECT * FROM child")) == []
        again = store.try_begin()
        assert again is not None
        again.rollback()


def test_a_closed_store_refuses(store: SqliteStore) -> None:
    store.close()
    with pytest.raises(StoreClosedError):
        store.try_begin()
