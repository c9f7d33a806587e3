"""End to end through the real ``claude_code`` engine: the pool claims, the job checks out
a real git repository served by the GitHub simulator, the fake ``claude`` prints real
stream-json, and the result is settled, recorded and published."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import anyio
import pytest

from service.engine.claude_code import ClaudeCodeEngine
from service.review.checkout import auth_header
from service.review.pool import WorkerPool
from tests.fake_claude import Scenario
from tests.worker_helpers import REPO, build_sim, close_sim, files_under

ANSWER = {"summary": "Adds a constant.", "risk": "low", "findings": [
    {"path": "src/new.py", "line": 1, "side": "RIGHT", "start_line": None,
     "severity": "minor", "category": "style", "title": "Name the constant",
     "body": "`x` says nothing about what it holds."}]}


@pytest.mark.anyio
async def test_a_review_through_claude_code_end_to_end(tmp_path: Path) -> None:
    sim = build_sim(tmp_path / "sim")
    text = "```json\n" + json.dumps(ANSWER) + "\n```"
    scenario = Scenario(tmp_path / "fake", [
        {"init": {}},
        {"tool_use": {"name": "Read", "input": {"file_path": "src/new.py"},
                      "usage": {"input_tokens": 5, "output_tokens": 20}}},
        {"assistant": {"text": text, "usage": {"input_tokens": 10, "output_tokens": 200}}},
        {"result": {"result": text, "total_cost_usd": 0.01, "modelUsage": {
            "claude-sonnet-4-5": {"inputTokens": 15, "outputTokens": 220,
                                  "cacheReadInputTokens": 3000,
                                  "cacheCreationInputTokens": 265, "costUSD": 0.01}}}},
    ])
    sim.engine = ClaudeCodeEngine(command=scenario.command, environ=dict(os.environ),
                                  kill_grace_seconds=0.5, result_grace_seconds=2.0,
                                  sandbox=scenario.sandbox,
                                  # The fake CLI's calls carry no system prompt of its own.
                                  overhead_tokens=0)
    try:
        token = await sim.github.installation_token(sim.installation_id)
        pr = sim.open_pr({"src/new.py": "x = 1\n"})
        key = sim.enqueue_opened(pr)
        pool = WorkerPool(store=sim.queue.store, leasing=sim.queue.leasing,
                          governor=sim.governor, job=sim.runner(),
                          clock=sim.world.clock.now, count=1, idle_min=0.02, idle_max=0.05)
        stop = asyncio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(pool.run, stop)
            with anyio.fail_after(20):
                while sim.status(key) != "done":
                    await anyio.sleep(0.02)
            stop.set()

        [row] = sim.ledger(key)
        assert (row["used_tokens"], row["usage_confidence"], row["engine"]) == (
            3500, "exact", "claude_code")
        assert row["stop_reason"] == "completed" and row["reviewed_lines"] > 0
        run = sim.run_row(key)
        assert run is not None and run["outcome"] == "completed"
        assert [f["title"] for f in json.loads(run["findings"])] == ["Name the constant"]
        assert [r.outcome for r in sim.publisher.runs] == ["completed"]
        assert [r.content for r in sim.world.issue(REPO, pr.number).reactions] == ["eyes"]

        call = scenario.call(1)
        worktree = Path(call["cwd"])
        assert worktree.parent == sim.checkouts.worktrees and not worktree.exists()
        assert files_under(sim.checkouts.worktrees) == []
        recorded = json.dumps(call)
        for secret in (token, auth_header(token)):
            assert secret not in recorded  # not in the engine's argv, env, stdin or cwd
        assert "src/new.py" in call["stdin"]  # the diff did reach it
    finally:
        await close_sim(sim)
