"""A loop's nap between passes, ended early by a wake-up from any thread.

What enqueues work (the webhook receiver, the poller) wakes the loops that act on it
(the early 👀, the check runs) so they look at once instead of at their next interval.
"""

from __future__ import annotations

import asyncio

import anyio


class Nap:
    """``await nap(stop, seconds)`` sleeps until ``wake()``, ``stop`` or ``seconds``."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    def wake(self) -> None:
        """End the current (or the next) nap. Safe from any thread."""
        loop = self._loop
        if loop is None or not loop.is_running():
            self._event.set()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            self._event.set()
        else:
            loop.call_soon_threadsafe(self._event.set)

    def begin(self) -> None:
        """A pass starts: a wake-up from now on ends the nap after it (none is lost)."""
        self._loop = asyncio.get_running_loop()
        self._event.clear()

    async def __call__(self, stop: asyncio.Event, seconds: float) -> None:
        with anyio.move_on_after(seconds):
            async with anyio.create_task_group() as tg:
                async def wait(event: asyncio.Event) -> None:
                    await event.wait()
                    tg.cancel_scope.cancel()
                tg.start_soon(wait, self._event)
                tg.start_soon(wait, stop)
