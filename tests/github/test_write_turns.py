"""``WriteTurns``: one write at a time per installation, the 👀 ahead of the rest; and the
client keeping to it (the acknowledgement is not held back by the spacing)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from service.github.write_turns import WriteTurns
from tests.kit.waiting import wait_for_async
from tests.publisher_rig import REPO, Rig
from tests.simulator.faults import Fault


async def _writer(turns: WriteTurns, name: str, order: list[str], *, urgent: bool = False,
                  hold: asyncio.Event | None = None) -> None:
    async with turns.turn(urgent=urgent):
        order.append(name)
        if hold is not None:
            await hold.wait()


def test_an_urgent_write_goes_before_every_ordinary_one_waiting() -> None:
    async def scenario() -> list[str]:
        turns, order, hold = WriteTurns(), [], asyncio.Event()
        first = asyncio.ensure_future(_writer(turns, "review", order, hold=hold))
        await asyncio.sleep(0)
        rest = [asyncio.ensure_future(_writer(turns, name, order, urgent=name.startswith("eyes")))
                for name in ("check-1", "check-2", "eyes-1", "summary", "eyes-2")]
        await asyncio.sleep(0)
        assert turns.waiting == 5
        hold.set()
        await asyncio.gather(first, *rest)
        return order

    assert asyncio.run(scenario()) == ["review", "eyes-1", "eyes-2", "check-1", "check-2",
                                       "summary"]


def test_a_waiter_cancelled_before_its_turn_is_passed_over() -> None:
    async def scenario() -> list[str]:
        turns, order, hold = WriteTurns(), [], asyncio.Event()
        first = asyncio.ensure_future(_writer(turns, "first", order, hold=hold))
        await asyncio.sleep(0)
        doomed = asyncio.ensure_future(_writer(turns, "doomed", order))
        after = asyncio.ensure_future(_writer(turns, "after", order))
        await asyncio.sleep(0)
        doomed.cancel()  # its request went away while it waited
        hold.set()
        await asyncio.gather(first, doomed, after, return_exceptions=True)
        return order

    assert asyncio.run(scenario()) == ["first", "after"]


@pytest.mark.anyio
async def test_the_client_sends_the_eyes_ahead_and_unspaced(tmp_path: Path) -> None:
    """Through the real client against the simulator: with a comment's post in flight and
    another waiting, the 👀 goes next, and is not held back by the 1 s spacing (the
    client's sleeps are virtual: the rig records them)."""
    rig = Rig.create(tmp_path)
    try:
        pr = rig.add_pull()
        inst, comments = rig.installation_id, f"/repos/{REPO}/issues/{pr.number}/comments"
        rig.world.faults.faults.append(Fault(method="POST", path_glob=comments, delay=0.3))
        slow = asyncio.ensure_future(rig.github.post_json(inst, comments, {"body": "slow"}))
        await wait_for_async("the slow post to be in flight", lambda: any(
            r.method == "POST" and r.path == comments for r in rig.world.requests),
            interval=0.01)
        ordinary = asyncio.ensure_future(rig.github.post_json(inst, comments, {"body": "next"}))
        urgent = asyncio.ensure_future(rig.github.post_json(
            inst, f"/repos/{REPO}/issues/{pr.number}/reactions", {"content": "eyes"},
            idempotent=True, urgent=True))
        await asyncio.gather(slow, ordinary, urgent)
    finally:
        await rig.aclose()
    posts = [r.path for r in rig.world.requests if r.method == "POST"
             and not r.path.endswith("/access_tokens")]
    assert posts == [comments, f"/repos/{REPO}/issues/{pr.number}/reactions", comments]
    assert rig.sleeps == [1.0]  # the spacing, before the ordinary write only
