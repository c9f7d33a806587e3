"""The worker pool: owners, naps and wake-ups, restarts with the same owner, graceful stop,
and many jobs through the real governor never exceeding a window."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.budget.windows import WINDOWS, limit_of
from service.engine.base import EngineRequest, EngineResult, unknown_usage
from service.model.jobs import Job
from service.observe.health import Health
from service.review.pool import WorkerPool, owner_id
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.worker_helpers import REPO, Sim, budget, build_sim, close_sim, files_under

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _job(n: int, kind: str = "pr_opened") -> Job:
    if kind == "mention":
        return Job(kind="mention", repo=REPO, pr_number=n, actor_id=7, comment_id=1000 + n,
                   comment_source="issue")
    return Job(kind="pr_opened", repo=REPO, pr_number=n, actor_id=7, head_sha=f"{n:040x}")


async def _until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    with anyio.fail_after(timeout):
        while not predicate():
            await anyio.sleep(0.01)


async def _run_pool(pool: WorkerPool, body: Callable[[asyncio.Event], Awaitable[None]]
                    ) -> None:
    stop = asyncio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(pool.run, stop)
        try:
            await body(stop)
        finally:
            stop.set()


@pytest.fixture
def parts(tmp_path: Path) -> tuple[SqliteStore, QueueDriver, Governor, Clock]:
    store = new_sqlite_store(tmp_path / "state.db")
    clock = Clock()
    return store, QueueDriver(store, lease=timedelta(seconds=60)), Governor(store, budget()), clock


def test_owner_ids_are_host_pid_slot() -> None:
    assert owner_id(3, host="box", pid=42) == "box:42:3"
    assert owner_id(0).endswith(":0")


@pytest.mark.anyio
async def test_wake_ends_a_nap_at_once(parts: tuple[SqliteStore, QueueDriver, Governor, Clock]
                                       ) -> None:
    store, queue, governor, clock = parts
    done: list[tuple[str, float]] = []

    async def job(claim: Claim) -> None:
        governor.settle(claim, Usage(5, "exact", "t", None), now=clock())
        queue.finish(claim.dedupe_key, claim.lease.owner)
        done.append((claim.dedupe_key, time.monotonic()))

    pool = WorkerPool(store=queue.store, leasing=queue.leasing,
                      governor=governor, job=job, clock=clock, count=2,
                      host="box", pid=1, idle_min=3600.0, idle_max=3600.0)
    assert pool.owners == ("box:1:0", "box:1:1")

    async def body(stop: asyncio.Event) -> None:
        # Both workers found nothing and sleep for an hour: only the wake can bring them.
        await _until(lambda: len(pool.napping) == 2, timeout=30)
        queue.enqueue(_job(1), now=clock())
        pool.wake()
        await _until(lambda: bool(done), timeout=30.0)
        # From another thread, as a webhook handler's worker thread would.
        queue.enqueue(_job(2), now=clock())
        await anyio.to_thread.run_sync(pool.wake)
        await _until(lambda: len(done) == 2, timeout=30.0)

    try:
        await _run_pool(pool, body)
    finally:
        store.close()
    assert sum(pool.claims.values()) == 2


@pytest.mark.anyio
async def test_a_crashed_worker_restarts_with_the_same_owner_and_its_charge_is_lost(
        tmp_path: Path, parts: tuple[SqliteStore, QueueDriver, Governor, Clock]) -> None:
    store, queue, governor, clock = parts
    health = Health(store)
    calls: list[Claim] = []

    async def job(claim: Claim) -> None:
        calls.append(claim)
        if len(calls) == 1:
            raise RuntimeError("worker bug")  # dies holding the lease and the reservation
        governor.settle(claim, Usage(40, "exact", "t", None), now=clock())
        queue.finish(claim.dedupe_key, claim.lease.owner)

    pool = WorkerPool(store=queue.store, leasing=queue.leasing,
                      governor=governor, job=job, clock=clock, count=1,
                      health=health, host="box", pid=1, idle_min=0.02, idle_max=0.05,
                      restart_delay=0.01)
    key = _job(1).dedupe_key
    queue.enqueue(_job(1), now=clock())

    async def body(stop: asyncio.Event) -> None:
        await _until(lambda: pool.restarts["box:1:0"] == 1)
        await anyio.sleep(0.1)
        assert len(calls) == 1  # the lease is still live: nobody may take the row
        clock.now += timedelta(seconds=61)
        pool.wake()
        await _until(lambda: len(calls) == 2)
        await _until(lambda: queue.get(key) is not None and queue.get(key).status == "done")

    try:
        await _run_pool(pool, body)
        with store.read() as conn:
            rows = conn.execute("SELECT owner, stop_reason, used_tokens, usage_confidence"
                                " FROM ledger WHERE dedupe_key = ? ORDER BY id", (key,)).fetchall()
        report = health.report(clock())
    finally:
        store.close()
    assert calls[0].lease.owner == calls[1].lease.owner == "box:1:0"
    assert calls[1].lease.attempt == 2
    assert rows == [("box:1:0", "lost", 10_000, "unavailable"),
                    ("box:1:0", "completed", 40, "exact")]
    workers = report["checks"]["workers"]  # type: ignore[index]
    assert workers["alive"] == 1 and workers["dead"] == {}


@pytest.mark.anyio
async def test_graceful_stop_lets_the_running_job_finish_and_claims_nothing_more(
        parts: tuple[SqliteStore, QueueDriver, Governor, Clock]) -> None:
    store, queue, governor, clock = parts
    started = asyncio.Event()
    finished: list[str] = []

    async def job(claim: Claim) -> None:
        started.set()
        await anyio.sleep(0.3)
        governor.settle(claim, Usage(5, "exact", "t", None), now=clock())
        queue.finish(claim.dedupe_key, claim.lease.owner)
        finished.append(claim.dedupe_key)

    for n in (1, 2, 3):
        queue.enqueue(_job(n), now=clock())
    pool = WorkerPool(store=queue.store, leasing=queue.leasing,
                      governor=governor, job=job, clock=clock, count=1,
                      idle_min=0.02, idle_max=0.05, grace_seconds=120.0)
    stop = asyncio.Event()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run, stop)
            await started.wait()
            stop.set()
            t0 = time.monotonic()
        assert time.monotonic() - t0 < 60.0  # the job's 0.3 s, not the 120 s grace
        assert finished == [_job(1).dedupe_key]
        assert queue.counts()["pending"] == 2 and queue.counts()["done"] == 1
    finally:
        store.close()


@pytest.mark.anyio
async def test_a_job_past_the_grace_period_is_cancelled_settled_and_released(
        tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        pr = sim.open_pr({"src/app.py": "x\n"})
        key = sim.enqueue_opened(pr)
        in_engine = asyncio.Event()

        async def hang(request: EngineRequest) -> None:
            in_engine.set()
            await anyio.sleep(60)

        sim.engine.hook = hang
        pool = WorkerPool(store=sim.queue.store, leasing=sim.queue.leasing,
                          governor=sim.governor, job=sim.runner(),
                          clock=sim.world.clock.now, count=1, idle_min=0.02, idle_max=0.05,
                          grace_seconds=0.2)
        stop = asyncio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run, stop)
            await in_engine.wait()
            stop.set()
        [row] = sim.ledger(key)
        assert (row["used_tokens"], row["usage_confidence"], row["stop_reason"]) == (
            10_000, "unavailable", "infrastructure")
        queued = sim.queue.get(key)
        assert queued is not None and (queued.status, queued.attempts) == ("pending", 1)
        assert files_under(sim.checkouts.worktrees) == []
    finally:
        await close_sim(sim)


def _window_charges(sim: Sim) -> list[tuple[str, int, int]]:
    """For each reservation instant and window: (window, charge then, limit)."""
    with sim.store.read() as conn:
        rows = conn.execute("SELECT reserved_at, COALESCE(used_tokens, reserved_tokens)"
                            " FROM ledger").fetchall()
    out = []
    for at, _ in rows:
        for window in WINDOWS:
            start = to_db_time(datetime.fromisoformat(at) - window.duration)
            charge = sum(c for t, c in rows if start < t <= at)
            out.append((window.name, charge, limit_of(window, sim.governor.config)))
    return out


@pytest.mark.anyio
async def test_twenty_jobs_on_two_workers_never_exceed_a_window(tmp_path: Path) -> None:
    # Session limit 10,000; runs reserve 1,000 and spend 600 (all 1,000 on a timeout):
    # the twenty jobs ask for more than the window holds.
    sim = build_sim(tmp_path, config=budget(max_run_tokens=1_000, session=10_000,
                                            weekly=7_000_000))
    try:
        sim.engine.tokens = 600
        prs = [sim.open_pr({f"src/f{i}.py": f"v = {i}\n"}) for i in range(20)]
        expected: dict[str, str] = {}
        timeouts = {prs[i].number for i in (3, 11)}
        closed = {prs[i].number for i in (5, 14)}
        for i, pr in enumerate(prs):
            key = sim.enqueue_mention(pr)[0] if i % 4 == 0 else sim.enqueue_opened(pr)
            expected[key] = ("closed" if pr.number in closed else
                             "timeout" if pr.number in timeouts else "completed")
        for number in closed:
            sim.world.close(REPO, number)

        async def watch(request: EngineRequest) -> None:
            snapshot = sim.governor.snapshot(sim.world.clock.now())
            assert all(w.charged <= w.limit for w in snapshot.windows)
            await anyio.sleep(0.01)

        def answer(request: EngineRequest) -> EngineResult:
            number = request.log_extra["pr"]
            if number in timeouts:
                return EngineResult(usage=unknown_usage("fake", None), stop_reason="timeout")
            return sim.engine.completed(request)

        sim.engine.hook = watch
        sim.engine.answer = answer
        pool = WorkerPool(store=sim.queue.store, leasing=sim.queue.leasing,
                          governor=sim.governor, job=sim.runner(),
                          clock=sim.world.clock.now, count=2, idle_min=0.02, idle_max=0.05)
        concurrent: list[int] = []

        async def body(stop: asyncio.Event) -> None:
            last, quiet = None, 0
            with anyio.fail_after(40):
                while quiet < 15:
                    await anyio.sleep(0.02)
                    counts = sim.queue.counts()
                    concurrent.append(counts["claimed"])
                    state = (counts["pending"], counts["done"], counts["claimed"])
                    quiet = quiet + 1 if state == last and counts["claimed"] == 0 else 0
                    last = state

        await _run_pool(pool, body)
        with sim.store.read() as conn:
            ledger = conn.execute("SELECT dedupe_key, stop_reason, settled_at, owner FROM ledger"
                                  ).fetchall()
        assert all(settled is not None for _, _, settled, _ in ledger)
        assert len({k for k, *_ in ledger}) == len(ledger)  # one row per claimed trigger
        for key, reason, _, _ in ledger:
            assert reason == expected[key], key
        assert {owner for *_, owner in ledger} == set(pool.owners)
        assert max(concurrent) == 2
        assert all(charge <= limit for _, charge, limit in _window_charges(sim))
        # The budget, not the queue, was the limit: some automatic reviews wait (the ladder
        # refuses them first, at mention_only), still pending for when the window frees.
        waiting = sim.queue.rows(["pending"])
        assert any(r.kind == "pr_opened" for r in waiting)
        assert len(ledger) + len(waiting) == 20
    finally:
        await close_sim(sim)


class Unreachable:
    """A store whose database cannot be reached for the first ``outage`` claims (the
    claim's is the one concurrent transaction the pool opens)."""

    outage = 2

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def transaction(self, *, concurrent: bool = False) -> Any:
        if concurrent and self.outage:
            self.outage -= 1
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return self._store.transaction(concurrent=concurrent)


@pytest.mark.anyio
async def test_an_unreachable_database_is_waited_out_not_crashed_on(
        parts: tuple[SqliteStore, QueueDriver, Governor, Clock]) -> None:
    store, queue, governor, clock = parts
    unreachable = Unreachable(store)
    done: list[str] = []

    async def job(claim: Claim) -> None:
        governor.settle(claim, Usage(5, "exact", "t", None), now=clock())
        queue.finish(claim.dedupe_key, claim.lease.owner)
        done.append(claim.dedupe_key)

    pool = WorkerPool(store=unreachable, leasing=queue.leasing,  # type: ignore[arg-type]
                      governor=governor, job=job, clock=clock, count=1,
                      host="box", pid=1, idle_min=0.01, idle_max=0.02, restart_delay=0.01)
    queue.enqueue(_job(1), now=clock())

    async def body(stop: asyncio.Event) -> None:
        await _until(lambda: bool(done), timeout=30.0)

    try:
        await _run_pool(pool, body)
    finally:
        store.close()
    assert done == [_job(1).dedupe_key] and unreachable.outage == 0
    assert pool.restarts["box:1:0"] == 0  # waited out, not a crash
