"""Group commit: webhook deliveries written many to a transaction, on the event loop.

The receiver answers a delivery only once the transaction holding it has committed, and
with ``synchronous = FULL`` every commit is a WAL sync. One transaction per delivery
would queue every request behind every other one's sync, so deliveries that arrive while
a batch is being written wait and go together in the next: one ``BEGIN IMMEDIATE``, a
few statements, one sync for the lot.

Where each part runs, and why:

- **The statements run on the event loop** (``stage``). Once the write lock is held they
  only touch pages in memory -- SQLite writes the WAL at COMMIT -- so they are quick, and
  one thread then holds the GIL for the whole request. A writer thread doing this work
  traded the GIL with the loop around every SQLite call, several context switches per
  delivery, and cost about a third more CPU per request (docs/PERFORMANCE.md).
- **Waiting for the lock never happens on the loop.** ``stage`` begins without waiting
  (``Database.try_begin``); when another connection holds the write lock it returns
  None and the whole batch is written on a worker thread instead (``write``), which
  waits up to the busy timeout as every other writer does.
- **The COMMIT's sync runs on the loop while syncs are quick**: a fraction of a
  millisecond on an SSD, where handing it to a thread and back costs more CPU than the
  wait, and the requests that arrive meanwhile simply wait in the socket buffers for the
  next batch. When the syncs' running average (``1/8`` weight on the newest) passes
  ``INLINE_SYNC_SECONDS``, the next batches are committed on a worker thread, so a slow
  disk cannot stall the loop; one batch in ``PROBE_EVERY`` is still synced on the loop,
  and one quick probe brings the commits back. A lone slow sync does not move the
  average that far.

Before each batch the loop gets one pass: the answers of the batch just committed go
out (a sync on the loop does not yield, so they would otherwise wait for the next batch's
sync too), and the requests read in that pass join the batch. A lone delivery goes at
once.

When a batch fails because the store cannot be reached (``unavailable``: a database
outage, a lock held past the busy timeout), the deliveries that queued behind it fail at
once with it: in an outage every delivery is answered within one store timeout of its
arrival, not after the timeouts of every batch ahead of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, Protocol, TypeVar

__all__ = ["GroupCommit", "Staged"]

T = TypeVar("T")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: At most this many deliveries share one transaction (bounds how long the lock is held).
MAX_BATCH: Final = 128
#: Syncs slower than this on average send the next batches' COMMITs to a worker thread.
INLINE_SYNC_SECONDS: Final = 0.005
#: While syncs are slow, one batch in this many is still committed on the loop.
PROBE_EVERY: Final = 32


class Staged(Protocol[R_co]):
    """A batch written in an open transaction that still has to be committed."""

    def commit(self) -> None:
        """COMMIT (blocking: the sync), on the loop or a worker thread; rolls back on failure."""

    def committed(self) -> Sequence[R_co | Exception]:
        """On the loop, after ``commit`` returned: one outcome per item."""

    def failed(self, exc: Exception) -> Sequence[R_co | Exception]:
        """On the loop, after ``commit`` raised ``exc``: one outcome per item."""


@dataclass(slots=True)
class _Item(Generic[T, R]):
    value: T
    future: asyncio.Future[R]


def _resolve(items: Sequence[_Item[T, R]], outcomes: Sequence[R | Exception]) -> None:
    """Hand each waiting request its outcome."""
    for item, outcome in zip(items, outcomes, strict=True):
        if item.future.done():  # its request was cancelled meanwhile
            continue
        if isinstance(outcome, Exception):
            item.future.set_exception(outcome)
        else:
            item.future.set_result(outcome)


class GroupCommit(Generic[T, R]):
    """Writes everything ``submit``-ted meanwhile as one batch, one batch at a time.

    ``stage(batch)`` runs on the event loop and must not block: it returns a ``Staged``
    batch, or None when it cannot start without waiting; its ``commit`` runs on the loop
    or on a worker thread as the module docstring says (``timer`` measures the syncs).
    ``write(batch)`` is the blocking path, run on a worker thread: it writes and commits
    the batch itself. Both take the batch's values; ``write`` and ``Staged`` return one
    outcome per item, a result or the exception that item failed with. An exception raised
    by ``stage``, ``write`` or ``commit`` fails the whole batch.

    One event loop at a time drains a ``GroupCommit``; a delivery submitted from another
    loop meanwhile is written alone on the blocking path.
    """

    def __init__(
        self,
        stage: Callable[[Sequence[T]], Staged[R] | None],
        write: Callable[[Sequence[T]], Sequence[R | Exception]],
        *,
        max_batch: int = MAX_BATCH,
        inline_sync: float = INLINE_SYNC_SECONDS,
        timer: Callable[[], float] = time.perf_counter,
        unavailable: Callable[[Exception], bool] = lambda exc: False,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._stage = stage
        self._write = write
        self._max_batch = max_batch
        self._inline_sync = inline_sync
        self._timer = timer
        self._unavailable = unavailable
        self._sync_average = 0.0  # seconds, over the syncs timed on the loop
        self._slow = 0  # batches committed on a thread since the average went over
        self._pending: list[_Item[T, R]] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop draining, if any
        self._drain_task: asyncio.Task[None] | None = None

    @property
    def draining(self) -> bool:
        """Whether a batch is being written now."""
        return self._drain_task is not None

    @property
    def syncs_on_loop(self) -> bool:
        """Whether the next batch's COMMIT runs on the event loop (syncs are quick)."""
        return self._slow == 0

    async def submit(self, value: T) -> R:
        """Queue ``value`` for the next batch and wait until that batch is committed."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            # Another loop drains: its open transaction may be in flight, so this value is
            # written alone, waiting for the lock like any other writer.
            return _single(await self._blocking(loop, [value]))
        return await self._queue(loop, value)

    def _queue(self, loop: asyncio.AbstractEventLoop, value: T) -> asyncio.Future[R]:
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append(_Item(value, future))
        if self._drain_task is None:
            self._loop = loop
            self._drain_task = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        items: list[_Item[T, R]] = []
        try:
            while True:
                # One pass of the loop first: the last batch's answers go out (a sync on
                # the loop does not yield), and the requests it reads join this batch.
                await asyncio.sleep(0)
                if not self._pending:
                    break
                items = self._pending[:self._max_batch]
                del self._pending[:self._max_batch]
                outcomes = await self._batch(loop, [item.value for item in items])
                _resolve(items, outcomes)
                items = []
                down = _down(outcomes, self._unavailable)
                if down is not None and self._pending:
                    # The store could not be reached for the whole wait of this batch:
                    # what queued behind it meanwhile fails now, with the same answer,
                    # instead of each batch waiting out the store's timeout in turn (the
                    # n-th would be answered after n timeouts). What arrives from here on
                    # starts a fresh batch, which tries the store again.
                    failed, self._pending = self._pending, []
                    _resolve(failed, [down] * len(failed))
        finally:
            self._loop = None
            self._drain_task = None
            # Only reached with work left if this task was cancelled (the loop is ending):
            # whoever still waits is told rather than left hanging.
            stopped = RuntimeError("group commit stopped before this item was written")
            _resolve(items + self._pending, [stopped] * (len(items) + len(self._pending)))
            self._pending.clear()

    async def _batch(self, loop: asyncio.AbstractEventLoop,
                     batch: list[T]) -> Sequence[R | Exception]:
        try:
            staged = self._stage(batch)
        except Exception as exc:
            return [exc] * len(batch)
        if staged is None:
            return await self._blocking(loop, batch)
        try:
            if self._slow % PROBE_EVERY == 0:
                started = self._timer()
                staged.commit()
                elapsed = self._timer() - started
                if self._slow and elapsed <= self._inline_sync:
                    self._sync_average = elapsed  # a quick probe: the disk is quick again
                else:
                    self._sync_average += (elapsed - self._sync_average) / 8
                self._slow = int(self._sync_average > self._inline_sync)
            else:
                await loop.run_in_executor(None, staged.commit)
                self._slow += 1
        except Exception as exc:
            return _checked(staged.failed(exc), batch)
        return _checked(staged.committed(), batch)

    async def _blocking(self, loop: asyncio.AbstractEventLoop,
                        batch: list[T]) -> Sequence[R | Exception]:
        try:
            return _checked(await loop.run_in_executor(None, self._write, batch), batch)
        except Exception as exc:
            return [exc] * len(batch)


def _down(outcomes: Sequence[R | Exception],
          unavailable: Callable[[Exception], bool]) -> Exception | None:
    """The error when every item of a batch failed because the store is unavailable."""
    first = outcomes[0] if outcomes else None
    if isinstance(first, Exception) and unavailable(first) and all(
            isinstance(o, Exception) for o in outcomes):
        return first
    return None


def _checked(outcomes: Sequence[R | Exception], batch: Sequence[object]) -> Sequence[R | Exception]:
    if len(outcomes) != len(batch):
        error = RuntimeError(f"{len(outcomes)} outcomes for {len(batch)} items")
        return [error] * len(batch)
    return outcomes


def _single(outcomes: Sequence[R | Exception]) -> R:
    outcome = outcomes[0]
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
