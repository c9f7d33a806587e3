"""Whose turn it is to write, per installation: one write at a time, the 👀 first.

GitHub asks that an installation's content-creating requests go one at a time, spaced
(its secondary limits), so the client queues them. A review being posted, its check runs
and the summary comment are several writes each; the 👀 that acknowledges a new request
must not wait behind them, since it is what tells a person within a second that they were
heard. So a write is ``urgent`` (the acknowledgement) or not: an urgent one takes the next
turn ahead of every ordinary one waiting, and the client does not hold it back for the
spacing after the write before it (it still counts as the last write, so the next
ordinary one is spaced after it). Turns are handed over in order within each lane.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["WriteTurns"]


class WriteTurns:
    """One installation's writes, one at a time (``turn``), urgent ones first."""

    def __init__(self) -> None:
        self._busy = False
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._ordinary: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Writes waiting for their turn."""
        return sum(not f.done() for f in (*self._urgent, *self._ordinary))

    @asynccontextmanager
    async def turn(self, *, urgent: bool = False) -> AsyncIterator[None]:
        """Hold the installation's one turn to write for the block."""
        if self._busy:
            handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            (self._urgent if urgent else self._ordinary).append(handed)
            try:
                await handed
            except asyncio.CancelledError:
                if handed.done() and not handed.cancelled():
                    self._pass()  # the turn reached us as we were cancelled: pass it on
                raise
        else:
            self._busy = True
        try:
            yield
        finally:
            self._pass()

    def _pass(self) -> None:
        """Hand the turn to the next waiter (urgent first), or free it."""
        for lane in (self._urgent, self._ordinary):
            while lane:
                waiter = lane.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._busy = False
