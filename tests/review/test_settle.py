"""What a job writes for its trigger's check run: in progress on the head it reviews, and
each ending that runs no engine completed with the reason and the numbers, in the same
transaction as the settle; a plan's usage limit hands the row back to wait for the reset
with its attempt uncounted."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from service.engine.base import EngineRequest, EngineResult
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.storage import checks
from service.storage.checks import CheckRow
from tests.simulator import push_to_pull
from tests.worker_helpers import REPO, Sim, budget, build_sim, close_sim, worker_sim

__all__ = ["worker_sim"]  # the ``sim`` fixture

pytestmark = pytest.mark.anyio




def shown(sim: Sim, key: str) -> list[CheckRow]:
    with sim.store.read() as tx:
        return checks.rows(tx, key)


async def test_a_review_shows_in_progress_on_its_head_until_the_publisher_ends_it(
        sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x = 1\n"})
    key = sim.enqueue_opened(pr)
    seen: list[list[CheckRow]] = []

    async def look(_: EngineRequest) -> None:
        seen.append(shown(sim, key))

    sim.engine.hook = look
    await sim.runner()(sim.claim())

    [[during]] = seen
    assert (during.target.head_sha, during.state.status) == (pr.head.head_sha, "in_progress")
    assert during.state.title == f"Reviewing {pr.head.head_sha[:7]}"
    [after] = shown(sim, key)  # recorded; the (recording) publisher ends nothing
    assert after == during


async def test_too_large_completes_neutral_with_the_numbers(sim: Sim) -> None:
    pr = sim.open_pr({"big.txt": "x\n" * 400, "bigger.txt": "y\n" * 700})
    key = sim.enqueue_opened(pr)
    await sim.runner(sim.configured(review={"max_diff_lines": 100}))(sim.claim())

    [row] = shown(sim, key)
    assert (row.state.status, row.state.conclusion) == ("completed", "neutral")
    assert row.state.title == "Not reviewed: too large (2 files, each over 100 lines)"
    assert "the largest has 70" in row.state.summary  # the diff's lines, headers included
    assert sim.status(key) == "done"


async def test_an_estimate_over_the_reservation_completes_neutral_with_both(
        tmp_path: Path) -> None:
    sim = build_sim(tmp_path, config=budget(max_run_tokens=300))
    try:
        key = sim.enqueue_opened(sim.open_pr({"src/big.py": "b = 1\n" * 60}))
        # The fake prices the diff at about 200 tokens, and keeps 200 for the answer.
        await sim.runner()(sim.claim())
        [row] = shown(sim, key)
        assert row.state.conclusion == "neutral"
        assert row.state.title.startswith("Not reviewed: estimated ")
        assert row.state.title.endswith("over the 300-token limit")
        # The cheapest call there could have been: its prompt and its answer room.
        said = int(row.state.title.split("estimated ")[1].split(" tokens")[0].replace(" ", ""))
        assert said > 300
    finally:
        await close_sim(sim)


async def test_a_closed_and_a_superseded_trigger_complete_neutral(sim: Sim) -> None:
    closing = sim.open_pr({"a.py": "a\n"})
    moving = sim.open_pr({"b.py": "b\n"})
    closed_key, moved_key = sim.enqueue_opened(closing), sim.enqueue_opened(moving)
    first, second = sim.claim(), sim.claim()
    sim.world.close(REPO, closing.number, merged=True)
    newer = push_to_pull(sim.world, REPO, moving.number, sim.git, {"c.py": "c\n"})
    marks = CheckMarks(lambda: sim.config.checks)
    for claim in (first, second):
        with sim.store.transaction() as tx:  # the loop had opened them queued
            checks.show_if_new(tx, marks.target(claim.dedupe_key, "review", REPO,
                                                claim.job.pr_number, str(claim.job.head_sha)),
                               text.queued("review"), sim.now())
        await sim.runner()(claim)

    [closed] = shown(sim, closed_key)
    assert closed.state.title == "Not reviewed: the pull request was merged"
    [moved] = shown(sim, moved_key)
    assert moved.state.title == "Not reviewed: superseded by a newer head"
    assert newer.head_sha[:7] in moved.state.summary


async def test_a_plan_limit_waits_for_the_reset_its_attempt_uncounted_then_runs(
        sim: Sim) -> None:
    resets = sim.now() + timedelta(hours=2)
    answers = iter(["limited", "done"])

    def answer(request: EngineRequest) -> EngineResult:
        if next(answers) == "limited":
            return EngineResult(usage=sim.engine.usage(), stop_reason="usage_limit",
                                usage_limit_resets_at=resets, detail="plan limit reached")
        return sim.engine.completed(request)

    sim.engine.answer = answer
    key = sim.enqueue_opened(sim.open_pr({"src/app.py": "x = 1\n"}))
    await sim.runner()(sim.claim())

    row = sim.queue.get(key)
    assert row is not None
    assert (row.status, row.attempts, row.leased_until) == ("pending", 0, resets)
    assert sim.run_row(key) is None and sim.publisher.runs == []
    assert sim.ledger(key)[0]["stop_reason"] == "usage_limit"
    assert sim.queue.claim(now=sim.now(), owner="w", admit=sim.governor.admit) is None

    sim.world.clock.advance((resets - sim.now()).total_seconds() + 1)
    await sim.runner()(sim.claim())
    assert sim.status(key) == "done" and len(sim.engine.requests) == 2
    assert [r["stop_reason"] for r in sim.ledger(key)] == ["usage_limit", "completed"]
