"""The 👀 goes out when work is queued, not when a worker is free (found by the reaction
benchmark: with both workers busy, a request waited for a whole review before its 👀).

``EarlyAck`` (service/publish/acknowledge.py) acknowledges recently queued rows as soon as
the receiver or the poller wakes it; the job's own acknowledgement is then skipped.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from service.publish.acknowledge import EarlyAck, SkipAcked
from service.storage.queue import Claim
from tests.faults.rig import FaultRig
from tests.kit.publishers import RecordingPublisher
from tests.worker_helpers import build_sim, close_sim


def reactions(rig: FaultRig, key: str) -> list[float]:
    """Host-monotonic arrival of every 👀 POST for a mention's comment."""
    repo, comment_id = key.split(":")[1], key.rsplit(":", maxsplit=1)[-1]
    path = f"/repos/{repo}/issues/comments/{comment_id}/reactions"
    return [r.monotonic for r in rig.world.requests.matching("POST", path)]


@pytest.mark.anyio
async def test_a_request_is_acknowledged_at_once_while_every_worker_is_busy(
        tmp_path: Path) -> None:
    rig = FaultRig.create(tmp_path, repos=2, workers=1, engine_seconds=(3.0, 3.0))
    first_repo, second_repo = rig.repos
    async with rig.running() as task:
        await rig.wait_for(lambda: len(rig.rows(
            "SELECT name FROM watermarks WHERE name LIKE 'comments:%'"
            " OR name LIKE 'pull_requests:%'")) >= 4, "seeding")
        busy = rig.mention(first_repo)
        await rig.deliver()
        await rig.wait_for(lambda: rig.status(busy) == "claimed", "the only worker")
        waiting = rig.mention(second_repo)
        sent = time.monotonic()
        assert await rig.deliver() == [202]
        await rig.wait_for(lambda: reactions(rig, waiting), "the 👀")
        # Acknowledged on arrival, not when a worker came free: well before the only
        # worker's 3 s review ended (it is still claimed below).
        assert reactions(rig, waiting)[0] - sent < 3.0
        assert rig.status(waiting) == "pending" and rig.status(busy) == "claimed"
        assert rig.logged("acknowledged on arrival", dedupe_key=waiting)
        await rig.wait_for(lambda: all(rig.published(k) for k in (busy, waiting)),
                           "both reviews")
    assert task.result() == 0
    for key in (busy, waiting):  # the job did not acknowledge a second time
        assert len(reactions(rig, key)) == 1
        assert rig.posts_of(key) == 1


class FlakyAcker:
    def __init__(self, failing: set[str]) -> None:
        self.failing = failing
        self.acked: list[str] = []

    async def ack(self, claim: Claim) -> None:
        if claim.dedupe_key in self.failing:
            raise RuntimeError("GitHub said no")
        self.acked.append(claim.dedupe_key)


@pytest.mark.anyio
async def test_only_recent_rows_once_and_a_failure_is_left_to_the_job(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        before_pr, old_pr, failing_pr, fresh_pr = (
            sim.open_pr({f"src/f{i}.py": "x\n"}) for i in range(4))
        before = sim.enqueue_opened(before_pr)  # queued before this process started
        sim.world.clock.advance(1)
        acker = FlakyAcker(set())
        early = EarlyAck(store=sim.store, acker=acker, clock=sim.now,
                         recent=timedelta(minutes=10))
        sim.world.clock.advance(1)
        old = sim.enqueue_opened(old_pr)
        sim.world.clock.advance(11 * 60)  # queued 11 minutes ago: out of the window
        failing = sim.enqueue_opened(failing_pr)
        fresh = sim.enqueue_opened(fresh_pr)
        acker.failing.add(failing)
        assert await early.sweep() == 1
        assert await early.sweep() == 0  # nothing is acknowledged twice
        assert acker.acked == [fresh]
        assert early.acknowledged(fresh) and not early.acknowledged(failing)
        assert not early.acknowledged(old) and not early.acknowledged(before)

        publisher = RecordingPublisher()
        wrapped = SkipAcked(publisher, early)
        while (claim := sim.queue.claim(now=sim.now(), owner="w")) is not None:
            await wrapped.ack(claim)
        # The job acknowledges what was not acknowledged early, or failed early; once.
        assert [c.dedupe_key for c in publisher.acks] == [before, old, failing]
    finally:
        await close_sim(sim)
