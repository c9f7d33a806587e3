"""Group commit (``service.intake.webhook.group_commit``), with real event loops and worker threads.

The store side is faked here (``tests/intake/webhook/test_deliveries.py`` has the real one): a
``stage`` that records its batches and a ``Staged`` whose commit can be held or fail.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence

import pytest

from service.intake.webhook.group_commit import PROBE_EVERY, GroupCommit

Outcome = str | Exception


def _outcomes(values: Sequence[int]) -> list[Outcome]:
    return [ValueError(f"bad {v}") if v < 0 else f"done {v}" for v in values]


class FakeStaged:
    def __init__(self, owner: FakeStore, values: list[int]) -> None:
        self._owner = owner
        self._values = values

    def commit(self) -> None:
        owner = self._owner
        owner.commit_threads.append(threading.current_thread())
        owner.committing.set()
        owner.release.wait(5)
        if owner.fail_commit is not None:
            raise owner.fail_commit

    def committed(self) -> Sequence[Outcome]:
        return self._owner.answer(self._values)

    def failed(self, exc: Exception) -> Sequence[Outcome]:
        return [exc] * len(self._values)


class FakeStore:
    """``stage`` and ``write`` for a GroupCommit of ints, recording what each was given."""

    def __init__(self) -> None:
        self.staged: list[list[int]] = []
        self.written: list[list[int]] = []
        self.write_threads: list[threading.Thread] = []
        self.commit_threads: list[threading.Thread] = []
        self.committing = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.busy = False  # stage answers None, as when another connection holds the lock
        self.fail_stage: Exception | None = None
        self.fail_commit: Exception | None = None
        self.fail_write: Exception | None = None
        self.answer = _outcomes

    def stage(self, batch: Sequence[int]) -> FakeStaged | None:
        if self.fail_stage is not None:
            raise self.fail_stage
        if self.busy:
            return None
        values = list(batch)
        self.staged.append(values)
        return FakeStaged(self, values)

    def write(self, batch: Sequence[int]) -> list[Outcome]:
        self.write_threads.append(threading.current_thread())
        if self.fail_write is not None:
            raise self.fail_write
        values = list(batch)
        self.written.append(values)
        return _outcomes(values)


class ScriptedTimer:
    """A ``timer`` whose every commit takes the next of ``durations`` seconds."""

    def __init__(self, durations: Iterator[float]) -> None:
        self._durations = durations
        self._now = 0.0
        self._started = False

    def __call__(self) -> float:
        if self._started:  # the end of a timed commit
            self._now += next(self._durations)
        self._started = not self._started
        return self._now


def _writer(store: FakeStore, **options: object) -> GroupCommit[int, str]:
    return GroupCommit(store.stage, store.write, **options)  # type: ignore[arg-type]


async def _submit_all(writer: GroupCommit[int, str], values: Sequence[int]
                      ) -> list[str | BaseException]:
    return await asyncio.gather(*(writer.submit(v) for v in values),
                                return_exceptions=True)


def _thread_mode(store: FakeStore) -> GroupCommit[int, str]:
    writer = _writer(store, inline_sync=0.001, timer=ScriptedTimer(iter([1.0] * 1000)))
    assert asyncio.run(writer.submit(0)) == "done 0"  # on the loop, and slow
    assert not writer.syncs_on_loop
    return writer


def test_deliveries_submitted_together_share_one_batch_committed_on_the_loop() -> None:
    store = FakeStore()
    writer = _writer(store)
    loop_thread: list[threading.Thread] = []

    async def scenario() -> list[str | BaseException]:
        loop_thread.append(threading.current_thread())
        return await _submit_all(writer, range(20))

    assert asyncio.run(scenario()) == [f"done {v}" for v in range(20)]
    assert store.staged == [list(range(20))]
    assert store.commit_threads == loop_thread  # a quick sync stays on the loop
    assert store.written == []


def test_a_batch_never_exceeds_max_batch_and_keeps_arrival_order() -> None:
    store = FakeStore()
    writer = _writer(store, max_batch=3)

    assert asyncio.run(_submit_all(writer, range(11))) == [f"done {v}" for v in range(11)]
    assert store.staged == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10]]


def test_a_batchs_answers_go_out_before_the_next_batch_is_written() -> None:
    # A sync on the loop does not yield: without a pass of the loop between batches, the
    # answers of one batch would wait for the next batch's sync too.
    store = FakeStore()
    answered: list[int] = []
    answered_at_stage: list[list[int]] = []

    def stage(batch: Sequence[int]) -> FakeStaged | None:
        answered_at_stage.append(list(answered))
        return store.stage(batch)

    writer: GroupCommit[int, str] = GroupCommit(stage, store.write, max_batch=2)

    async def one(value: int) -> None:
        await writer.submit(value)
        answered.append(value)

    async def scenario() -> None:
        await asyncio.gather(*(one(v) for v in range(6)))

    asyncio.run(scenario())
    assert answered_at_stage == [[], [0, 1], [0, 1, 2, 3]]


def test_while_a_slow_sync_runs_on_a_thread_the_loop_serves_and_gathers_the_next_batch(
) -> None:
    store = FakeStore()
    writer = _thread_mode(store)
    store.release.clear()
    store.committing.clear()
    ticks = 0

    async def scenario() -> list[str | BaseException]:
        nonlocal ticks
        first = asyncio.ensure_future(writer.submit(1))
        while not store.committing.is_set():  # the loop is free while the sync runs
            ticks += 1
            await asyncio.sleep(0.001)
        rest = asyncio.ensure_future(_submit_all(writer, range(2, 22)))
        await asyncio.sleep(0.05)
        store.release.set()
        return [await first, *await rest]

    assert asyncio.run(scenario()) == [f"done {v}" for v in range(1, 22)]
    assert store.staged == [[0], [1], list(range(2, 22))]
    assert ticks > 0
    assert threading.main_thread() not in store.commit_threads[1:]


def test_slow_syncs_move_commits_to_a_thread_and_a_quick_probe_brings_them_back() -> None:
    store = FakeStore()
    durations = iter([0.0002] * 3 + [0.03] * 2 + [0.0002] * 10)
    writer = _writer(store, inline_sync=0.005, timer=ScriptedTimer(durations))
    on_loop: list[bool] = []
    loop_thread = threading.current_thread()

    async def scenario() -> None:
        for value in range(5 + PROBE_EVERY + 1):
            on_loop.append(writer.syncs_on_loop)
            assert await writer.submit(value) == f"done {value}"

    asyncio.run(scenario())
    # The first 30 ms sync takes the average to under 4 ms, the second over 5 ms: the
    # next PROBE_EVERY - 1 batches commit on a thread, then one is synced on the loop
    # again (a probe) and, being quick, brings the commits back.
    assert on_loop[:5] == [True] * 5
    assert on_loop[5:5 + PROBE_EVERY] == [False] * PROBE_EVERY
    assert on_loop[5 + PROBE_EVERY] is True
    committed_on_loop = [t is loop_thread for t in store.commit_threads]
    assert committed_on_loop == ([True] * 5 + [False] * (PROBE_EVERY - 1) + [True, True])


def test_a_lone_slow_sync_keeps_commits_on_the_loop() -> None:
    store = FakeStore()
    durations = iter([0.0002, 0.03, 0.0002, 0.0002])
    writer = _writer(store, inline_sync=0.005, timer=ScriptedTimer(durations))

    async def scenario() -> None:
        for value in range(4):
            await writer.submit(value)
            assert writer.syncs_on_loop

    asyncio.run(scenario())


def test_when_stage_cannot_begin_the_batch_is_written_on_a_worker_thread() -> None:
    store = FakeStore()
    store.busy = True
    writer = _writer(store)

    assert asyncio.run(_submit_all(writer, [1, 2])) == ["done 1", "done 2"]
    assert store.written == [[1, 2]]
    assert all(t is not threading.main_thread() for t in store.write_threads)


def test_an_item_that_failed_gets_its_exception_and_the_others_their_results() -> None:
    writer = _writer(FakeStore())

    outcomes = asyncio.run(_submit_all(writer, [1, -2, 3]))

    assert outcomes[0] == "done 1" and outcomes[2] == "done 3"
    assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "bad -2"


@pytest.mark.parametrize("where", ["stage", "commit", "write"])
def test_a_failure_fails_its_batch_and_the_next_batch_is_written(where: str) -> None:
    store = FakeStore()
    store.busy = where == "write"
    setattr(store, f"fail_{where}", OSError("disk full"))
    writer = _writer(store)

    async def scenario() -> tuple[list[str | BaseException], str]:
        failed = await _submit_all(writer, [1, 2])
        setattr(store, f"fail_{where}", None)
        return failed, await writer.submit(3)

    failed, later = asyncio.run(scenario())
    assert all(isinstance(f, OSError) for f in failed)
    assert later == "done 3"


@pytest.mark.parametrize("path", ["staged", "write"])
def test_the_wrong_number_of_outcomes_fails_the_batch(path: str) -> None:
    store = FakeStore()
    if path == "staged":
        store.answer = lambda values: []
    else:
        store.busy = True
        store.write = lambda batch: []  # type: ignore[method-assign]
    writer = _writer(store)

    with pytest.raises(RuntimeError, match="0 outcomes for 1 items"):
        asyncio.run(writer.submit(1))


def test_a_cancelled_request_is_still_written_and_harms_nobody() -> None:
    store = FakeStore()
    writer = _writer(store)

    async def scenario() -> list[str | BaseException]:
        doomed = asyncio.ensure_future(writer.submit(1))
        others = asyncio.ensure_future(_submit_all(writer, [2, 3]))
        await asyncio.sleep(0)
        doomed.cancel()
        return await others

    assert asyncio.run(scenario()) == ["done 2", "done 3"]
    assert store.staged == [[1, 2, 3]]


def test_a_delivery_from_another_loop_while_one_drains_is_written_alone() -> None:
    store = FakeStore()
    writer = _thread_mode(store)
    store.release.clear()
    store.committing.clear()
    other: list[str] = []

    async def scenario() -> str:
        first = asyncio.ensure_future(writer.submit(1))
        await asyncio.to_thread(store.committing.wait, 5)
        # Another thread runs another loop and submits while this one's batch commits.
        thread = threading.Thread(target=lambda: other.append(asyncio.run(writer.submit(2))))
        thread.start()
        await asyncio.to_thread(thread.join, 5)
        store.release.set()
        return await first

    assert asyncio.run(scenario()) == "done 1"
    assert other == ["done 2"]
    assert store.written == [[2]]


def test_requests_still_waiting_when_the_writer_is_cancelled_are_told() -> None:
    store = FakeStore()
    writer = _thread_mode(store)
    store.release.clear()
    store.committing.clear()

    async def scenario() -> list[str | BaseException]:
        waiting = asyncio.ensure_future(_submit_all(writer, [1, 2]))
        await asyncio.to_thread(store.committing.wait, 5)
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
    store.busy = True  # every batch takes the blocking path, on a thread
    entered, gate = threading.Event(), threading.Event()
    write = store.write

    def slow_write(batch: Sequence[int]) -> list[Outcome]:
        entered.set()
        gate.wait(30)
        if len(store.write_threads) == 0:
            store.write_threads.append(threading.current_thread())
            raise StoreDown("no connection in time") if down else OSError("disk full")
        return write(batch)

    writer = GroupCommit(store.stage, slow_write,  # type: ignore[arg-type]
                         unavailable=lambda exc: isinstance(exc, StoreDown))

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
