"""Group commit: one writer thread records webhook deliveries, many to a transaction.

The receiver answers a delivery only once the transaction holding it has committed, and
with ``synchronous = FULL`` every commit is a WAL sync (about 2 ms under load here). One
transaction per delivery would queue every request behind every other one's sync, so
deliveries that arrive while a batch is being written wait and go together in the next:
one ``BEGIN IMMEDIATE``, one sync, one wake-up of the event loop for the lot.

Why a thread of its own rather than ``anyio.to_thread`` per batch: the event loop must not
block on a WAL sync or on another process holding the write lock (up to the busy
timeout), and a thread hop costs more CPU here than the SQL it carries. A long-lived
thread takes work from a list under a condition variable and hands results back with one
``call_soon_threadsafe`` per batch; it retires after ``idle`` seconds without work and is
started again by the next delivery. Being the only writer of this process also keeps our
threads from queueing on SQLite's lock, whose busy handler sleeps in coarse steps.

Under load the first arrival after a commit would go alone and the rest wait a whole sync
behind it, so batches would alternate 1, N, 1, N. When fewer than half as many are waiting
as the previous batch held, and that batch was written moments ago, the writer waits up
to ``coalesce`` seconds for them first.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Generic, TypeVar

__all__ = ["GroupCommit"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: At most this many deliveries share one transaction (bounds how long the lock is held).
MAX_BATCH: Final = 128
#: How long the writer may wait, under load, for the rest of a batch to arrive.
COALESCE_SECONDS: Final = 0.002
#: A writer thread with nothing to do for this long ends; the next delivery starts one.
IDLE_SECONDS: Final = 10.0


@dataclass(slots=True)
class _Item(Generic[T, R]):
    value: T
    now: datetime
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[R]


def _resolve(items: Sequence[_Item[T, R]], outcomes: Sequence[R | Exception]) -> None:
    """On the event loop: hand each waiting request its outcome."""
    for item, outcome in zip(items, outcomes, strict=True):
        if item.future.done():  # its request was cancelled meanwhile
            continue
        if isinstance(outcome, Exception):
            item.future.set_exception(outcome)
        else:
            item.future.set_result(outcome)


class GroupCommit(Generic[T, R]):
    """Runs ``write(batch)`` on one writer thread for everything ``submit``-ted meanwhile.

    ``write`` takes ``[(value, now), ...]`` and returns one outcome per item, a result or
    the exception that item failed with; an exception raised by ``write`` itself fails
    the whole batch. ``submit`` may be awaited from any event loop (each item is answered
    on the loop it came from).
    """

    def __init__(
        self,
        write: Callable[[Sequence[tuple[T, datetime]]], Sequence[R | Exception]],
        *,
        max_batch: int = MAX_BATCH,
        coalesce: float = COALESCE_SECONDS,
        idle: float = IDLE_SECONDS,
        name: str = "group-commit",
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._write = write
        self._max_batch = max_batch
        self._coalesce = coalesce
        self._idle = idle
        self._name = name
        self._cond = threading.Condition(threading.Lock())
        self._pending: list[_Item[T, R]] = []
        self._thread: threading.Thread | None = None
        self._idle_wait = False  # the writer waits for any work
        self._wanted = 0  # the writer waits until this many are pending (0: not waiting)
        self._last_batch = 0
        self._last_end = 0.0  # time.monotonic() when the last batch was written

    @property
    def running(self) -> bool:
        """Whether a writer thread is alive now (it retires when idle)."""
        with self._cond:
            return self._thread is not None

    async def submit(self, value: T, now: datetime) -> R:
        """Queue ``value`` for the next batch and wait until that batch is written."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        with self._cond:
            self._pending.append(_Item(value, now, loop, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            elif self._idle_wait or (self._wanted and len(self._pending) >= self._wanted):
                self._cond.notify()
        return await future

    # -- the writer thread --

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            try:
                outcomes: Sequence[R | Exception] = self._write(
                    [(item.value, item.now) for item in batch])
                if len(outcomes) != len(batch):
                    raise RuntimeError(f"{len(outcomes)} outcomes for {len(batch)} items")
            except Exception as exc:
                outcomes = [exc] * len(batch)
            self._last_batch = len(batch)
            self._last_end = time.monotonic()
            self._answer(batch, outcomes)

    def _take(self) -> list[_Item[T, R]] | None:
        """The next batch, or None when the thread should end (idle too long)."""
        with self._cond:
            if not self._pending:
                self._idle_wait = True
                try:
                    self._cond.wait(self._idle)
                finally:
                    self._idle_wait = False
                if not self._pending:
                    self._thread = None
                    return None
            wanted = self._last_batch // 2
            if (len(self._pending) < wanted
                    and time.monotonic() - self._last_end < self._coalesce * 5):
                self._wanted = wanted
                try:
                    self._cond.wait_for(lambda: len(self._pending) >= wanted, self._coalesce)
                finally:
                    self._wanted = 0
            batch = self._pending[:self._max_batch]
            del self._pending[:self._max_batch]
            return batch

    @staticmethod
    def _answer(batch: list[_Item[T, R]], outcomes: Sequence[R | Exception]) -> None:
        # One wake-up per event loop per batch (in the service there is one loop).
        by_loop: dict[asyncio.AbstractEventLoop, tuple[list[_Item[T, R]], list[R | Exception]]]
        by_loop = {}
        for item, outcome in zip(batch, outcomes, strict=True):
            items, results = by_loop.setdefault(item.loop, ([], []))
            items.append(item)
            results.append(outcome)
        for loop, (items, results) in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, items, results)
            except RuntimeError:  # that loop has closed: nobody is waiting any more
                log.debug("batch written after its event loop closed",
                          extra={"deliveries": len(items)})
