"""The ways a job ends without an engine (``endings``): nothing left after exclusions,
nothing that fits the model's window, a moved head; each settled at zero and said on the
pull request."""

from __future__ import annotations

import json

import pytest

from tests.simulator import push_to_pull
from tests.worker_helpers import (
    REPO,
    Sim,
    worker_sim,
)

__all__ = ["worker_sim"]  # the ``sim`` fixture


@pytest.mark.anyio
async def test_only_excluded_changes_record_an_empty_run_without_an_engine(sim: Sim) -> None:
    pr = sim.open_pr({"poetry.lock": "l\n"})
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    assert sim.engine.requests == []
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "completed"
    assert json.loads(run["findings"]) == []
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["stop_reason"], row["reviewed_lines"]) == (0, "completed",
                                                                             None)
    assert sim.status(key) == "done" and len(sim.publisher.runs) == 1


@pytest.mark.anyio
async def test_a_moved_head_supersedes_and_queues_the_current_head(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    claim = sim.claim()
    newer = push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/b.py": "b\n"})
    await sim.runner()(claim)

    assert sim.engine.requests == [] and sim.run_row(key) is None
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["stop_reason"]) == (0, "refused")
    assert sim.status(key) == "done"
    follow = sim.queue.get(f"pr_opened:{REPO}:{pr.number}:{newer.head_sha}")
    assert follow is not None and follow.status == "pending" and follow.actor_id == sim.alice_id


@pytest.mark.anyio
async def test_a_moved_head_on_a_draft_or_without_auto_review_queues_nothing(
        sim: Sim) -> None:
    for case in ("draft", "no_auto_review"):
        pr = sim.open_pr({"src/app.py": f"{case}\n"})
        sim.enqueue_opened(pr)
        claim = sim.claim()
        push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/b.py": "b\n"})
        config = sim.config
        if case == "draft":
            sim.world.set_draft(REPO, pr.number, True)
        else:
            config = sim.configured(triggers={"auto_review": False})
        await sim.runner(config)(claim)
    assert sim.queue.counts()["pending"] == 0 and sim.queue.counts()["done"] == 2


@pytest.mark.anyio
async def test_nothing_that_fits_the_window_is_a_run_that_read_nothing_and_says_so(
        sim: Sim) -> None:
    # A 2 000-token window: each file's diff alone is over what a call can carry.
    sim.engine.window = 2_000
    pr = sim.open_pr({"src/a.py": "a = 1\n" * 900, "src/b.py": "b = 2\n" * 900})
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    assert sim.engine.requests == []
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "truncated"  # never a base to build on
    assert json.loads(run["coverage"]) == {"files": 2, "reviewed": 0, "parts": 0,
                                           "pruned": []}
    assert {(o["path"], o["reason"]) for o in json.loads(run["omitted"])} == {
        ("src/a.py", "over_window"), ("src/b.py", "over_window")}
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["stop_reason"]) == (0, "refused")
    assert row["estimated_tokens"] is not None
    assert sim.status(key) == "done" and len(sim.publisher.runs) == 1


@pytest.mark.anyio
async def test_a_description_that_fits_no_call_is_answered_as_a_failure_saying_why(
        sim: Sim) -> None:
    sim.engine.window = 2_000
    pr = sim.open_pr({"src/a.py": "a = 1\n" * 900})
    key, _ = sim.enqueue_mention(pr, command="describe")
    await sim.runner()(sim.claim())
    assert sim.engine.requests == []
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "failed"  # nothing to post but why
    assert json.loads(run["coverage"])["reviewed"] == 0
