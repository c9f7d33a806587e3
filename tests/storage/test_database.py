"""``read_async`` and ``write_async``: the one way async code calls a table module, on both
backends — off the event loop, one read or one transaction, and a write under way finished
even when its caller is cancelled."""

from __future__ import annotations

import threading

import anyio
import pytest

from service.storage.database import Database, Transaction


def _count(tx: Transaction) -> int:
    (row,) = tx.execute("SELECT COUNT(*) FROM deliveries").fetchall()
    return int(row[0])


def _insert(tx: Transaction, delivery_id: str, threads: list[threading.Thread]) -> str:
    threads.append(threading.current_thread())
    tx.execute("INSERT INTO deliveries (delivery_id, event, received_at, outcome)"
               " VALUES (?, ?, ?, ?)", (delivery_id, "ping", "2026-12-04T00:00:00.000000Z", "ping"))
    return delivery_id


@pytest.mark.anyio
async def test_a_write_commits_off_the_loop_and_a_read_sees_it(database: Database) -> None:
    threads: list[threading.Thread] = []
    assert await database.write_async(_insert, "d-1", threads) == "d-1"
    assert threads != [threading.current_thread()]  # not on the event loop's thread
    assert await database.read_async(_count) == 1


@pytest.mark.anyio
async def test_a_failed_write_commits_nothing(database: Database) -> None:
    def fail(tx: Transaction) -> None:
        _insert(tx, "d-2", [])
        raise RuntimeError("the caller's own failure")

    with pytest.raises(RuntimeError, match="the caller's own failure"):
        await database.write_async(fail)
    assert await database.read_async(_count) == 0


@pytest.mark.anyio
async def test_a_write_under_way_finishes_and_returns_though_its_caller_is_cancelled(
        database: Database) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(tx: Transaction) -> str:
        started.set()
        assert release.wait(60)
        return _insert(tx, "d-3", [])

    returned: list[str] = []
    async with anyio.create_task_group() as group:
        async def writer() -> None:
            # The caller sees what was written (a lease it took, to record or hand back).
            returned.append(await database.write_async(slow, shield=True))

        group.start_soon(writer)
        await anyio.to_thread.run_sync(started.wait, 60)
        group.cancel_scope.cancel()  # the caller gives up while the write is under way
        release.set()
    assert returned == ["d-3"]
    assert await database.read_async(_count) == 1
