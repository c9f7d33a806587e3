"""The one nap every loop waits with: ended by its seconds, a wake-up from any thread, or a
stop; a wake-up during a pass is never lost."""

from __future__ import annotations

import asyncio
import threading

import pytest

from service.runtime.nap import Bell, Nap

LONG = 3600.0  # a nap that only a wake-up or a stop can end within the test


@pytest.mark.anyio
async def test_a_nap_lasts_its_seconds_on_the_sleep_it_was_given() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    nap = Nap(sleep)
    nap.begin()
    await nap(12.5)
    assert slept == [12.5]


@pytest.mark.anyio
async def test_a_wake_from_another_thread_ends_the_nap() -> None:
    nap = Nap()
    nap.begin()
    waker = threading.Timer(0.05, nap.wake)
    waker.start()
    try:
        await asyncio.wait_for(nap(LONG), timeout=120)
    finally:
        waker.join()


@pytest.mark.anyio
async def test_a_wake_during_the_pass_ends_the_nap_after_it() -> None:
    nap = Nap()
    nap.begin()
    nap.wake()  # work arrived while the pass ran: the nap after it ends at once
    await asyncio.wait_for(nap(LONG), timeout=120)
    nap.begin()  # a new pass forgets it
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(nap(LONG), timeout=0.05)


@pytest.mark.anyio
async def test_a_stop_ends_the_nap() -> None:
    stop = asyncio.Event()
    nap = Nap()
    nap.begin()
    asyncio.get_running_loop().call_later(0.05, stop.set)
    await asyncio.wait_for(nap(LONG, stop), timeout=120)


@pytest.mark.anyio
async def test_an_error_of_the_sleep_is_the_naps() -> None:
    async def broken(seconds: float) -> None:
        raise RuntimeError("the clock broke")

    nap = Nap(broken)
    nap.begin()
    with pytest.raises(RuntimeError, match="the clock broke"):
        await nap(1.0)


def test_a_bell_tells_every_answer_with_its_arguments() -> None:
    bell = Bell("installations")
    heard: list[tuple[str, object]] = []
    bell.ring("before anyone answers")  # nobody yet: nothing, and no error
    bell.answer(lambda change: heard.append(("poller", change)))
    bell.answer(lambda change: heard.append(("other", change)))
    bell.ring("added o/r")
    assert heard == [("poller", "added o/r"), ("other", "added o/r")]


@pytest.mark.anyio
async def test_a_bell_ends_the_naps_that_answer_it() -> None:
    bell, naps = Bell("queued"), [Nap(), Nap()]
    for nap in naps:
        nap.begin()
        bell.answer(nap.wake)
    threading.Thread(target=bell.ring).start()
    await asyncio.wait_for(asyncio.gather(*(nap(LONG) for nap in naps)), timeout=120)
