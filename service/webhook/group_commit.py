"""Group commit: webhook deliveries written many to a transaction, one batch at a time.

The receiver answers a delivery only once the transaction holding it has committed, and
with ``synchronous = FULL`` every commit is a WAL sync. One transaction per delivery
would queue every request behind every other one's sync, so the deliveries that arrive
while a batch is being written wait and go together in the next: one transaction, a few
statements, one sync for the lot. Each batch is written on a worker thread (parsing,
the trigger rules, the statements and the COMMIT), so the event loop never waits for the
store.

When a batch fails because the store cannot be reached (``unavailable``: a database
outage, a lock held past the busy timeout), the deliveries that queued behind it fail at
once with it: in an outage every delivery is answered within one store timeout of its
arrival, not after the timeouts of every batch ahead of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

import anyio.to_thread

__all__ = ["MAX_BATCH", "GroupCommit"]

T = TypeVar("T")
R = TypeVar("R")

#: At most this many deliveries share one transaction (bounds how long the lock is held).
MAX_BATCH: Final = 128


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

    ``write(batch)`` runs on a worker thread and returns one outcome per item, a result or
    the exception that item failed with; an exception it raises fails the whole batch.
    One event loop drains it at a time; a value submitted from another loop meanwhile is
    written alone.
    """

    def __init__(self, write: Callable[[Sequence[T]], Sequence[R | Exception]], *,
                 max_batch: int = MAX_BATCH,
                 unavailable: Callable[[Exception], bool] = lambda exc: False) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._write = write
        self._max_batch = max_batch
        self._unavailable = unavailable
        self._pending: list[_Item[T, R]] = []
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop draining, if any
        self._drain_task: asyncio.Task[None] | None = None

    @property
    def draining(self) -> bool:
        """Whether a batch is being written now."""
        return self._drain_task is not None

    async def submit(self, value: T) -> R:
        """Queue ``value`` for the next batch and wait until that batch is committed."""
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop is not loop:
            outcome = (await self._blocking([value]))[0]
            if isinstance(outcome, Exception):
                raise outcome
            return outcome
        future: asyncio.Future[R] = loop.create_future()
        self._pending.append(_Item(value, future))
        if self._drain_task is None:
            self._loop = loop
            self._drain_task = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        items: list[_Item[T, R]] = []
        try:
            while self._pending:
                items = self._pending[:self._max_batch]
                del self._pending[:self._max_batch]
                outcomes = await self._blocking([item.value for item in items])
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

    async def _blocking(self, batch: list[T]) -> Sequence[R | Exception]:
        try:
            outcomes = await anyio.to_thread.run_sync(self._write, batch)
        except Exception as exc:
            return [exc] * len(batch)
        if len(outcomes) != len(batch):
            error = RuntimeError(f"{len(outcomes)} outcomes for {len(batch)} items")
            return [error] * len(batch)
        return outcomes


def _down(outcomes: Sequence[R | Exception],
          unavailable: Callable[[Exception], bool]) -> Exception | None:
    """The error when every item of a batch failed because the store is unavailable."""
    first = outcomes[0] if outcomes else None
    if isinstance(first, Exception) and unavailable(first) and all(
            isinstance(o, Exception) for o in outcomes):
        return first
    return None
