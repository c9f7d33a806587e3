"""Group commit (``service.webhook.group_commit``), with real event loops and worker threads.

The store side is faked here (``tests/test_webhook_deliveries.py`` has the real one): a
``write`` that records its batches, and can be held or fail.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Sequence

import pytest

from service.webhook.group_commit import GroupCommit

Outcome = str | Exception


def _outcomes(values: Sequence[int]) -> list[Outcome]:
    return [ValueError(f"bad {v}") if v < 0 else f"done {v}" for v in values]


class FakeStore:
    """``write`` for a GroupCommit of ints, recording each batch and the thread it ran on."""

    def __init__(self) -> None:
        self.written: list[list[int]] = []
        self.write_threads: list[threading.Thread] = []
        self.writing = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_write: Exception | None = None
        self.answer = _outcomes

    def write(self, batch: Sequence[int]) -> list[Outcome]:
        self.write_threads.append(threading.current_thread())
        self.writing.set()
        self.release.wait(30)
        if self.fail_write is not None:
            raise self.fail_write
        values = list(batch)
        self.written.append(values)
        return self.answer(values)


def _writer(store: FakeStore, **options: object) -> GroupCommit[int, str]:
    return GroupCommit(store.write, **options)  # type: ignore[arg-type]


async def _submit_all(writer: GroupCommit[int, str], values: Iterable[int]
                      ) -> list[str | BaseException]:
    return await asyncio.gather(*(writer.submit(v) for v in values),
                                return_exceptions=True)


def test_what_arrives_while_a_batch_is_written_goes_together_in_the_next() -> None:
    store = FakeStore()
    store.release.clear()
    writer = _writer(store)
    loop_thread: list[threading.Thread] = []

    async def scenario() -> list[str | BaseException]:
        loop_thread.append(threading.current_thread())
        first = asyncio.ensure_future(writer.submit(0))
        await asyncio.to_thread(store.writing.wait, 30)
        rest = asyncio.ensure_future(_submit_all(writer, range(1, 20)))
        await asyncio.sleep(0)
        store.release.set()
        return [await first, *await rest]

    assert asyncio.run(scenario()) == [f"done {v}" for v in range(20)]
    assert store.written == [[0], list(range(1, 20))]  # a lone delivery goes at once
    assert loop_thread[0] not in store.write_threads  # never written on the event loop


def test_a_batch_never_exceeds_max_batch_and_keeps_arrival_order() -> None:
    store = FakeStore()
    writer = _writer(store, max_batch=3)

    assert asyncio.run(_submit_all(writer, range(11))) == [f"done {v}" for v in range(11)]
    assert [len(b) for b in store.written] == [3, 3, 3, 2]
    assert [v for b in store.written for v in b] == list(range(11))


def test_an_item_that_failed_gets_its_exception_and_the_others_their_results() -> None:
    writer = _writer(FakeStore())

    outcomes = asyncio.run(_submit_all(writer, [1, -2, 3]))

    assert outcomes[0] == "done 1" and outcomes[2] == "done 3"
    assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "bad -2"


def test_a_failure_fails_its_batch_and_the_next_batch_is_written() -> None:
    store = FakeStore()
    store.fail_write = OSError("disk full")
    writer = _writer(store)

    async def scenario() -> tuple[list[str | BaseException], str]:
        failed = await _submit_all(writer, [1, 2])
        store.fail_write = None
        return failed, await writer.submit(3)

    failed, later = asyncio.run(scenario())
    assert all(isinstance(f, OSError) for f in failed)
    assert later == "done 3"


def test_the_wrong_number_of_outcomes_fails_the_batch() -> None:
    store = FakeStore()
    store.answer = lambda values: []
    writer = _writer(store)

    with pytest.raises(RuntimeError, match="0 outcomes for 1 items"):
        asyncio.run(writer.submit(1))


def test_a_cancelled_request_is_still_written_and_harms_nobody() -> None:
    store = FakeStore()
    store.release.clear()
    writer = _writer(store)

    async def scenario() -> list[str | BaseException]:
        first = asyncio.ensure_future(writer.submit(0))
        await asyncio.to_thread(store.writing.wait, 30)
        doomed = asyncio.ensure_future(writer.submit(1))
        others = asyncio.ensure_future(_submit_all(writer, [2, 3]))
        await asyncio.sleep(0)
        doomed.cancel()
        store.release.set()
        await first
        return await others

    assert asyncio.run(scenario()) == ["done 2", "done 3"]
    assert store.written == [[0], [1, 2, 3]]


def test_a_delivery_from_another_loop_while_one_drains_is_written_alone() -> None:
    store = FakeStore()
    store.release.clear()
    writer = _writer(store)
    other: list[str] = []

    async def scenario() -> str:
        first = asyncio.ensure_future(writer.submit(1))
        await asyncio.to_thread(store.writing.wait, 30)
        # Another thread runs another loop and submits while this one's batch is written.
        thread = threading.Thread(target=lambda: other.append(asyncio.run(writer.submit(2))))
        thread.start()
        await asyncio.sleep(0.05)
        store.release.set()
        await asyncio.to_thread(thread.join, 30)
        return await first

    assert asyncio.run(scenario()) == "done 1"
    assert other == ["done 2"]
    assert sorted(store.written) == [[1], [2]]


def test_requests_still_waiting_when_the_writer_is_cancelled_are_told() -> None:
    store = FakeStore()
    store.release.clear()
    writer = _writer(store)

    async def scenario() -> list[str | BaseException]:
        waiting = asyncio.ensure_future(_submit_all(writer, [1, 2]))
        await asyncio.to_thread(store.writing.wait, 30)
        task = writer._drain_task
        assert task is not None
        task.cancel()
        outcomes = await waiting
        store.release.set()
        return outcomes

    outcomes = asyncio.run(scenario())
    assert all(isinstance(o, RuntimeError) and "stopped" in str(o) for o in outcomes)
    assert not writer.draining
    assert asyncio.run(writer.submit(3)) == "done 3"  # and the writer still works


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        _writer(FakeStore(), max_batch=0)


class StoreDown(Exception):
    """What the store raises when it cannot be reached (a database outage)."""


@pytest.mark.parametrize("down", [True, False], ids=["store unavailable", "another error"])
def test_what_queued_behind_a_batch_the_store_could_not_take_fails_with_it(
        down: bool) -> None:
    """In an outage each batch waits out the store's timeout: the deliveries that queued
    behind a failed one are answered at once, not one timeout later each. Any other
    failure is that batch's own, and the next batch is still written."""
    store = FakeStore()
    entered, gate = threading.Event(), threading.Event()
    write = store.write

    def slow_write(batch: Sequence[int]) -> list[Outcome]:
        entered.set()
        gate.wait(30)
        if len(store.write_threads) == 0:
            store.write_threads.append(threading.current_thread())
            raise StoreDown("no connection in time") if down else OSError("disk full")
        return write(batch)

    writer = GroupCommit(slow_write, unavailable=lambda exc: isinstance(exc, StoreDown))

    async def scenario() -> list[str | BaseException]:
        first = asyncio.ensure_future(writer.submit(1))
        await asyncio.get_running_loop().run_in_executor(None, entered.wait, 30)
        rest = [asyncio.ensure_future(writer.submit(v)) for v in (2, 3, 4)]
        await asyncio.sleep(0)
        gate.set()
        return await asyncio.gather(first, *rest, return_exceptions=True)

    outcomes = asyncio.run(scenario())
    if down:
        assert all(isinstance(o, StoreDown) for o in outcomes)
        assert store.written == []  # the store was not asked again for those behind
    else:
        assert isinstance(outcomes[0], OSError)
        assert outcomes[1:] == ["done 2", "done 3", "done 4"]
