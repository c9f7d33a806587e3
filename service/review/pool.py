"""The worker pool: N async workers that claim through the governor and run jobs.

Each worker has a stable owner id, ``host:pid:slot``, that it keeps for the life of the
process — also across a restart of its task. Its loop: claim
(``queue_lease.claim(admit=governor.admit)``, one transaction on a worker thread,
where the lease and the budget reservation commit together); run the job; repeat. With
nothing claimable (an empty queue, or a budget that admits nothing) it naps, doubling the
nap from ``idle_min`` to ``idle_max``; ``wake()`` — called by whatever enqueued work in
this process — ends every nap at once.

A worker task that raises is logged, reported to ``Health`` and restarted after
``restart_delay`` with the SAME owner id. Whatever it held stays leased until the lease
lapses; the next claim of that row (by any worker) closes the dead attempt's
reservation as ``lost`` (the governor's predecessor rule), so it stays charged.

``run(stop)`` returns once ``stop`` is set and the workers are done: they stop claiming
at once, a job in progress gets ``grace_seconds`` to finish (cut short when ``force`` is
set), and a job still running after that is cancelled (it settles as ``infrastructure``
and releases its row).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final

import anyio

from service.budget.governor import Governor
from service.observe.health import Health
from service.observe.metrics.instruments import Metrics
from service.runtime.nap import Nap
from service.storage import queue_lease
from service.storage.database import Database
from service.storage.errors import is_contention, is_unavailable
from service.storage.queue import Claim
from service.storage.queue_lease import Leasing

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
JobFn = Callable[[Claim], Awaitable[None]]

IDLE_MIN_SECONDS: Final = 1.0
IDLE_MAX_SECONDS: Final = 30.0
RESTART_DELAY_SECONDS: Final = 1.0
GRACE_SECONDS: Final = 30.0


def owner_id(slot: int, *, host: str | None = None, pid: int | None = None) -> str:
    """``host:pid:slot``: unique per worker across processes and hosts sharing a store."""
    return f"{host or socket.gethostname()}:{os.getpid() if pid is None else pid}:{slot}"


class WorkerPool:
    """``count`` workers running ``job`` for each claim; see the module docstring."""

    def __init__(
        self,
        *,
        store: Database,
        leasing: Leasing,
        governor: Governor,
        job: JobFn,
        clock: Clock,
        count: int,
        health: Health | None = None,
        host: str | None = None,
        pid: int | None = None,
        idle_min: float = IDLE_MIN_SECONDS,
        idle_max: float = IDLE_MAX_SECONDS,
        restart_delay: float = RESTART_DELAY_SECONDS,
        grace_seconds: float = GRACE_SECONDS,
        metrics: Metrics | None = None,
    ) -> None:
        if count < 1:
            raise ValueError("count must be at least 1")
        if not 0 < idle_min <= idle_max:
            raise ValueError("need 0 < idle_min <= idle_max")
        if restart_delay < 0 or grace_seconds < 0:
            raise ValueError("restart_delay and grace_seconds must not be negative")
        self._store = store
        self._leasing = leasing
        self._metrics = metrics
        self._governor = governor
        self._job = job
        self._clock = clock
        self._health = health
        self._idle = (idle_min, idle_max)
        self._restart_delay = restart_delay
        self._grace = grace_seconds
        self.owners: tuple[str, ...] = tuple(
            owner_id(slot, host=host, pid=pid) for slot in range(count))
        # One nap per worker: wake() ends them all and each worker begins its own just
        # before it claims, so a wake-up that lands during a claim is never lost.
        self._naps = {owner: Nap() for owner in self.owners}
        self._jobs: dict[str, anyio.CancelScope] = {}
        #: Claims taken and restarts made, per owner (for tests and /healthz).
        self.claims: dict[str, int] = dict.fromkeys(self.owners, 0)
        self.restarts: dict[str, int] = dict.fromkeys(self.owners, 0)
        #: The owners napping right now: found nothing to claim, waiting for a wake.
        self.napping: set[str] = set()

    def wake(self) -> None:
        """End every worker's nap now: new work was enqueued. Safe from any thread."""
        for nap in self._naps.values():
            nap.wake()

    async def run(self, stop: asyncio.Event, force: asyncio.Event | None = None) -> None:
        """Run the workers until ``stop`` is set, then wind down (see the module doc).

        ``force`` set after ``stop`` (a second SIGTERM) ends the grace period at once.
        """
        if self._health is not None:
            self._health.workers_started(list(self.owners))
        log.info("workers started", extra={"owners": list(self.owners)})
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._enforce_grace, stop, force or asyncio.Event())
            async with anyio.create_task_group() as workers:
                for owner in self.owners:
                    workers.start_soon(self._supervise, owner, stop)
            outer.cancel_scope.cancel()
        log.info("workers stopped", extra={"owners": list(self.owners)})

    async def _enforce_grace(self, stop: asyncio.Event, force: asyncio.Event) -> None:
        await stop.wait()
        self.wake()
        if self._jobs:
            log.info("stopping: %d job(s) running, %.0f s to finish", len(self._jobs),
                     self._grace)
        with anyio.move_on_after(self._grace):
            await force.wait()
        for owner, scope in list(self._jobs.items()):
            log.warning("grace period over; cancelling the job", extra={"owner": owner})
            scope.cancel()

    async def _supervise(self, owner: str, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self._work(owner, stop)
            except Exception as exc:
                log.exception("worker crashed; restarting it with the same owner",
                              extra={"owner": owner})
                if self._health is not None:
                    self._health.worker_died(owner, f"{type(exc).__name__}: {exc}")
                with anyio.move_on_after(self._restart_delay):
                    await stop.wait()
                if stop.is_set():
                    return
                self.restarts[owner] += 1
                if self._health is not None:
                    self._health.worker_restarted(owner)

    async def _work(self, owner: str, stop: asyncio.Event) -> None:
        idle_min, idle_max = self._idle
        nap = idle_min
        napping = self._naps[owner]
        while not stop.is_set():
            napping.begin()
            claim = await self._claim(owner)
            if claim is None:
                self.napping.add(owner)
                try:
                    await napping(nap, stop)
                finally:
                    self.napping.discard(owner)
                nap = min(idle_max, nap * 2)
                continue
            nap = idle_min
            self.claims[owner] += 1
            with anyio.CancelScope() as scope:
                self._jobs[owner] = scope
                try:
                    await self._job(claim)
                finally:
                    self._jobs.pop(owner, None)

    async def _claim(self, owner: str) -> Claim | None:
        def take() -> Claim | None:
            return queue_lease.claim(self._store, self._leasing, now=self._clock, owner=owner,
                         admit=self._governor.admit, lapsed=self._governor.close_lapsed)
        try:
            taken = await self._store.run(take)
            if self._metrics is not None:
                self._metrics.claimed(taken is not None)
            return taken
        except Exception as exc:
            if is_contention(exc):
                log.info("store busy; claiming again after a nap", extra={"owner": owner})
                return None
            if is_unavailable(exc):  # PostgreSQL restarting or failing over: wait it out
                log.warning("store unreachable; claiming again after a nap",
                            extra={"owner": owner, "error": type(exc).__name__})
                return None
            raise

