"""A loop's nap between passes, ended early by a wake-up from any thread.

The one wait every loop of the service naps with: the workers between claims, the poller
between cycles, the early 👀 and the check runs between passes. What enqueues work (the
webhook receiver, the poller) wakes the loops that act on it so they look at once instead
of at their next interval; a stop ends every nap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Sleep = Callable[[float], Awaitable[None]]


class Nap:
    """``await nap(seconds, stop)`` sleeps until ``wake()``, ``stop`` or ``seconds``.

    ``sleep`` is how the seconds pass (``asyncio.sleep``; a test's virtual clock); an
    error it raises is the nap's.
    """

    def __init__(self, sleep: Sleep = asyncio.sleep) -> None:
        self._sleep = sleep
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

    async def __call__(self, seconds: float, stop: asyncio.Event | None = None) -> None:
        waits = [asyncio.ensure_future(self._sleep(seconds)),
                 asyncio.ensure_future(self._event.wait())]
        if stop is not None:
            waits.append(asyncio.ensure_future(stop.wait()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
            await asyncio.gather(*waits, return_exceptions=True)
        sleeper = waits[0]
        failure = None if sleeper.cancelled() else sleeper.exception()
        if failure is not None:
            raise failure


class Bell:
    """One event of a process — "work was queued", "the installations changed" — told to
    everything that acts on it, from any thread.

    The composition root makes one bell per event and hands it to what rings it (the web
    receiver, the poller) and to what answers it (the workers, the early 👀, the check
    runs, the poller's refresh), each subscribing where it is built; a ring reaches every
    answer subscribed by then.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._answers: list[Callable[..., None]] = []

    def answer(self, fn: Callable[..., None]) -> None:
        """Call ``fn`` (with the ring's arguments) at every ring from now on."""
        self._answers.append(fn)

    def ring(self, *args: object) -> None:
        """Tell every answer; each must be safe from any thread and return at once."""
        for fn in tuple(self._answers):
            fn(*args)
