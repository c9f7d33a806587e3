"""Waiting for something a test cannot make happen at once: bounded by the process that
must make it happen still being alive, and by one generous ceiling — never by a figure
near the nominal time, which a loaded machine overshoots.

A wait that the ceiling ends is a hang, not slowness: the ceiling is minutes, so that two
busy cores, a cold disk or a garbage collection never fail a test that would have passed.
``PR_REVIEW_AGENT_WAIT_CEILING`` changes it (seconds).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["CEILING", "ProcessEnded", "alive", "wait_for", "wait_for_async"]

T = TypeVar("T")

#: How long any wait may last before it is called a hang.
CEILING: float = float(os.environ.get("PR_REVIEW_AGENT_WAIT_CEILING", "240"))


class ProcessEnded(AssertionError):
    """A process the wait depended on ended: what it waited for can no longer happen."""


def alive(*processes: subprocess.Popen[bytes] | subprocess.Popen[str] | None
          ) -> Callable[[], str | None]:
    """A liveness check for ``wait_for``: None while every process runs, else why not."""
    def check() -> str | None:
        for process in processes:
            if process is not None and process.poll() is not None:
                return f"process {process.args!r} exited with {process.returncode}"
        return None
    return check


def wait_for(what: str, probe: Callable[[], T | None], *,
             alive: Callable[[], str | None] | None = None, interval: float = 0.02,
             on_timeout: Callable[[], str] = lambda: "", ceiling: float | None = None) -> T:
    """``probe()`` until it returns something truthy (returned). Fails at once when
    ``alive()`` says a process it depends on ended, and after ``ceiling`` (default
    ``CEILING``) seconds otherwise."""
    limit = CEILING if ceiling is None else ceiling
    deadline = time.monotonic() + limit
    while True:
        value = probe()
        if value:
            return value
        ended = alive() if alive is not None else None
        if ended is not None:
            value = probe()  # it may have happened just before the end
            if value:
                return value
            raise ProcessEnded(f"waiting for {what}: {ended}\n{on_timeout()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {limit:.0f} s (a hang)\n{on_timeout()}")
        time.sleep(interval)


async def wait_for_async(what: str, probe: Callable[[], object | Awaitable[object]], *,
                         alive: Callable[[], str | None] | None = None,
                         interval: float = 0.05, ceiling: float | None = None) -> None:
    """``wait_for`` on an event loop: ``probe`` may be a coroutine function."""
    limit = CEILING if ceiling is None else ceiling
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        result = probe()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        ended = alive() if alive is not None else None
        if ended is not None:
            raise ProcessEnded(f"waiting for {what}: {ended}")
        if loop.time() > deadline:
            raise TimeoutError(f"no {what} after {limit:.0f} s (a hang)")
        await asyncio.sleep(interval)
