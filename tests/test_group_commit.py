"""The webhook writer thread (``service.group_commit``), with real threads and event loops."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from service.group_commit import GroupCommit

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


class Recorder:
    """A ``write`` that records its batches; the first call can be held until released."""

    def __init__(self, *, hold_first: bool = False) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[str] = set()
        self.release = threading.Event()
        self.entered = threading.Event()
        if not hold_first:
            self.release.set()

    def __call__(self, batch: Sequence[tuple[int, datetime]]) -> list[str | Exception]:
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        self.release.wait(5)
        values = [value for value, _ in batch]
        self.batches.append(values)
        return [ValueError(f"bad {v}") if v < 0 else f"done {v}" for v in values]


async def _submit_all(writer: GroupCommit[int, str], values: Sequence[int]
                      ) -> list[str | BaseException]:
    return await asyncio.gather(*(writer.submit(v, NOW) for v in values),
                                return_exceptions=True)


def test_what_arrives_while_a_batch_is_written_goes_in_the_next_one() -> None:
    write = Recorder(hold_first=True)
    writer: GroupCommit[int, str] = GroupCommit(write, name="test-writer")

    async def scenario() -> list[str | BaseException]:
        first = asyncio.ensure_future(writer.submit(0, NOW))
        await asyncio.to_thread(write.entered.wait, 5)  # the writer is inside batch [0]
        rest = asyncio.ensure_future(_submit_all(writer, range(1, 21)))
        await asyncio.sleep(0.05)  # all twenty are queued behind it
        write.release.set()
        return [await first, *await rest]

    outcomes = asyncio.run(scenario())

    assert outcomes == [f"done {v}" for v in range(21)]
    assert write.batches == [[0], list(range(1, 21))]
    assert write.threads == {"test-writer"}


def test_a_batch_never_exceeds_max_batch() -> None:
    write = Recorder(hold_first=True)
    writer: GroupCommit[int, str] = GroupCommit(write, max_batch=3)

    async def scenario() -> list[str | BaseException]:
        first = asyncio.ensure_future(writer.submit(0, NOW))
        await asyncio.to_thread(write.entered.wait, 5)
        rest = asyncio.ensure_future(_submit_all(writer, range(1, 11)))
        await asyncio.sleep(0.05)
        write.release.set()
        return [await first, *await rest]

    assert asyncio.run(scenario()) == [f"done {v}" for v in range(11)]
    assert [len(b) for b in write.batches] == [1, 3, 3, 3, 1]
    assert [v for b in write.batches for v in b] == list(range(11))  # in arrival order


def test_an_item_that_failed_gets_its_exception_and_the_others_their_results() -> None:
    writer: GroupCommit[int, str] = GroupCommit(Recorder())

    outcomes = asyncio.run(_submit_all(writer, [1, -2, 3]))

    assert outcomes[0] == "done 1" and outcomes[2] == "done 3"
    assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "bad -2"


def test_a_write_that_raises_fails_its_batch_and_the_writer_carries_on() -> None:
    calls: list[list[int]] = []

    def write(batch: Sequence[tuple[int, datetime]]) -> list[str | Exception]:
        calls.append([v for v, _ in batch])
        if len(calls) == 1:
            raise OSError("disk full")
        return [f"done {v}" for v, _ in batch]

    writer: GroupCommit[int, str] = GroupCommit(write)

    async def scenario() -> tuple[BaseException | str, str]:
        failed = await asyncio.gather(writer.submit(1, NOW), return_exceptions=True)
        return failed[0], await writer.submit(2, NOW)

    failed, later = asyncio.run(scenario())
    assert isinstance(failed, OSError)
    assert later == "done 2"


def test_a_write_that_answers_the_wrong_number_of_outcomes_fails_the_batch() -> None:
    writer: GroupCommit[int, str] = GroupCommit(lambda batch: [])

    with pytest.raises(RuntimeError, match="0 outcomes for 1 items"):
        asyncio.run(writer.submit(1, NOW))


def test_the_writer_thread_retires_when_idle_and_comes_back_for_the_next_delivery() -> None:
    write = Recorder()
    writer: GroupCommit[int, str] = GroupCommit(write, idle=0.05)

    assert asyncio.run(writer.submit(1, NOW)) == "done 1"
    deadline = time.monotonic() + 5
    while writer.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not writer.running

    assert asyncio.run(writer.submit(2, NOW)) == "done 2"
    assert write.batches == [[1], [2]]


def test_each_event_loop_is_answered_on_its_own_loop() -> None:
    write = Recorder()
    writer: GroupCommit[int, str] = GroupCommit(write)
    results: dict[int, list[str | BaseException]] = {}

    def loop_thread(base: int) -> None:
        async def run() -> list[str | BaseException]:
            loop = asyncio.get_running_loop()
            out = await _submit_all(writer, range(base, base + 50))
            assert asyncio.get_running_loop() is loop
            return out
        results[base] = asyncio.run(run())

    threads = [threading.Thread(target=loop_thread, args=(base,)) for base in (0, 1000)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)

    assert results[0] == [f"done {v}" for v in range(50)]
    assert results[1000] == [f"done {v}" for v in range(1000, 1050)]
    assert sorted(v for b in write.batches for v in b) == [*range(50), *range(1000, 1050)]


def test_a_cancelled_request_is_still_written_and_harms_nobody() -> None:
    write = Recorder(hold_first=True)
    writer: GroupCommit[int, str] = GroupCommit(write)

    async def scenario() -> str:
        doomed = asyncio.ensure_future(writer.submit(1, NOW))
        await asyncio.to_thread(write.entered.wait, 5)
        doomed.cancel()
        write.release.set()
        return await writer.submit(2, NOW)

    assert asyncio.run(scenario()) == "done 2"
    assert write.batches == [[1], [2]]


def test_a_batch_finished_after_its_loop_closed_does_not_stop_the_writer() -> None:
    write = Recorder(hold_first=True)
    writer: GroupCommit[int, str] = GroupCommit(write)
    loop = asyncio.new_event_loop()
    task = loop.create_task(writer.submit(1, NOW))
    loop.run_until_complete(asyncio.to_thread(write.entered.wait, 5))
    task.cancel()
    loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    loop.close()

    write.release.set()  # the answer for item 1 now has nowhere to go

    assert asyncio.run(writer.submit(2, NOW)) == "done 2"


def test_max_batch_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        GroupCommit(Recorder(), max_batch=0)
