"""A job that fails on GitHub waits before its next attempt (found by fault injection).

A job that fails for something outside it (GitHub answering 5xx, a token mint failing)
is settled as ``infrastructure`` and handed back; the attempt counts, and after three the
row is abandoned. Handed back as plain ``pending`` it was claimed again at once, so a
GitHub outage of a few seconds (the client's own retries included, about 15 s) used all
three attempts and abandoned the request. Now a failed attempt makes the row wait
(``Tuning.retry_delays``: 1 minute, then 4) before it can be claimed again, so the
three attempts span minutes of outage, not seconds; a job cancelled because the process
is stopping is handed back without a wait.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from tests.kit.queue import QueueDriver
from tests.worker_helpers import build_sim, close_sim


@pytest.mark.anyio
async def test_a_job_failed_by_github_waits_before_its_next_attempt(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        pr = sim.open_pr({"src/new.py": "x = 1\n"})
        key = sim.enqueue_opened(pr)
        outage = sim.world.faults.server_error(method="GET",
                                               path_glob=f"/repos/*/pulls/{pr.number}",
                                               status=502, times=None)
        runner = sim.runner()
        delays = runner.tuning.retry_delays
        assert delays == (timedelta(minutes=1), timedelta(minutes=4))

        await runner(sim.claim())  # attempt 1 fails on GitHub
        row = sim.queue.get(key)
        assert row is not None and (row.status, row.attempts) == ("pending", 1)
        failed_at = sim.now()
        assert row.leased_until is not None
        assert row.leased_until - failed_at == pytest.approx(delays[0], abs=timedelta(seconds=1))
        assert sim.queue.claim(now=sim.now(), owner="w2", admit=sim.governor.admit) is None
        sim.world.clock.advance(delays[0].total_seconds() + 1)

        await runner(sim.claim())  # attempt 2 fails too: the next wait is longer
        row = sim.queue.get(key)
        assert row is not None and (row.status, row.attempts) == ("pending", 2)
        assert row.leased_until is not None
        assert row.leased_until - sim.now() == pytest.approx(delays[1], abs=timedelta(seconds=1))
        sim.world.clock.advance(delays[0].total_seconds() + 1)
        assert sim.queue.claim(now=sim.now(), owner="w2", admit=sim.governor.admit) is None

        outage.times = outage.fired  # GitHub is back
        sim.world.clock.advance(delays[1].total_seconds())
        await runner(sim.claim())  # attempt 3 reviews
        assert sim.status(key) == "done"
        stops = [r["stop_reason"] for r in sim.ledger(key)]
        assert stops == ["infrastructure", "infrastructure", "completed"]
    finally:
        await close_sim(sim)


def test_a_row_released_with_a_time_is_not_claimable_before_it(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        queue = QueueDriver(sim.store)
        pr = sim.open_pr({"src/new.py": "x = 1\n"})
        key = sim.enqueue_opened(pr)
        claim = queue.claim(now=sim.now(), owner="w1")
        assert claim is not None
        later = sim.now() + timedelta(seconds=30)
        assert queue.release(key, "w1", not_before=later)
        assert queue.claim(now=later - timedelta(seconds=1), owner="w2") is None
        again = queue.claim(now=later, owner="w2")
        assert again is not None and (again.dedupe_key, again.lease.attempt) == (key, 2)
        assert queue.release(key, "w2")  # without a time: claimable at once
        assert queue.claim(now=later, owner="w3") is not None
    finally:
        sim.store.close()
        asyncio.run(sim.github.aclose())
