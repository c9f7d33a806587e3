"""How SIGINT and SIGTERM stop ``serve``: the first asks every component to stop
gracefully, a second cuts the wait short.

While the web server serves, uvicorn takes these two signals as well (its cooperative
signal handling, uvicorn 0.29 and later): it stops accepting, finishes the requests it has,
and once it has stopped raises each signal it took again, for the handlers it displaced.
The event loop has already delivered every signal to ``on_signal`` as it arrived (it reads
them from its wake-up descriptor, whoever else handles them), so the copies uvicorn raises
afterwards are echoes of signals already counted. ``web_stopped`` says how many to expect,
and they are not taken for second signals: one SIGTERM is one graceful stop.
"""

from __future__ import annotations

import asyncio
import logging
import signal

__all__ = ["Shutdown"]

log = logging.getLogger(__name__)


class Shutdown:
    """The process's SIGINT/SIGTERM handler (``on_signal``) and its two events."""

    def __init__(self, stop: asyncio.Event, force: asyncio.Event) -> None:
        self.stop = stop
        self.force = force
        self._serving = False
        self._taken_meanwhile = 0  # signals uvicorn also took while it served
        self._echoes = 0           # of those, the copies it has yet to raise again

    def on_signal(self, number: int) -> None:
        """A SIGINT or SIGTERM, as the event loop delivers it."""
        if self._echoes:
            self._echoes -= 1  # uvicorn raising again one it took: counted already
            return
        if self._serving:
            self._taken_meanwhile += 1
        if self.stop.is_set():
            log.warning("second signal: not waiting for open connections or running jobs")
            self.force.set()
            return
        log.info("shutting down", extra={"signal": signal.Signals(number).name})
        self.stop.set()

    def web_serving(self) -> None:
        """The web server is about to serve (uvicorn takes the signals from now on)."""
        self._serving = True

    def web_stopped(self) -> None:
        """The web server has stopped: uvicorn raises again what it took meanwhile."""
        self._serving = False
        self._echoes += self._taken_meanwhile
        self._taken_meanwhile = 0
