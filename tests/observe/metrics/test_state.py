"""What a scrape reads from the store: the deliveries, the queue, the estimate's accuracy,
and a store that is down as a series, not a failed scrape."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.config.schema import BudgetConfig
from service.observe.metrics.exposition import render
from service.observe.metrics.instruments import Metrics
from service.observe.metrics.state import StoreState
from service.storage.times import to_db_time
from tests.kit.stores import new_sqlite_store
from tests.observe.metrics.scrape import P, env, samples
from tests.webhook_env import NOW, Env

__all__ = ["env"]  # the fixture


@pytest.mark.anyio
async def test_a_store_that_is_down_is_a_series_not_a_failed_scrape(env: Env) -> None:
    await env.sender.send("pull_request", env.world.payloads.pull_request(
        "opened", env.world.pull("acme/widgets", 1)))
    env.store.close()
    response = await env.client.get("/metrics")
    assert response.status_code == 200
    found = samples(response.text)
    assert found[(f"{P}_store_up", ())] == 0
    assert not any(name == f"{P}_queue_rows" for name, _ in found)
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "enqueued"),))] == 1


@pytest.mark.anyio
async def test_deliveries_are_counted_and_the_queue_is_read_from_the_store(env: Env) -> None:
    pull = env.world.pull("acme/widgets", 1)
    await env.sender.send("pull_request", env.world.payloads.pull_request("opened", pull))
    await env.sender.send("pull_request", env.world.payloads.pull_request("labeled", pull))
    await env.post("pull_request", b"{", delivery_id="broken")  # signed, but not JSON: 400
    await env.post("pull_request", b"{}", delivery_id="forged", secret="wrong")
    response = await env.client.get("/metrics")
    assert response.status_code == 200
    found = samples(response.text)
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "enqueued"),))] == 1
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "ignored"),))] == 1
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "unparseable"),))] == 1
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "rejected"),))] == 1
    assert found[(f"{P}_webhook_seconds_count", ())] == 4
    assert found[(f"{P}_queue_rows", (("kind", "pr_opened"), ("status", "pending")))] == 1
    assert found[(f"{P}_queue_rows", (("kind", "mention"), ("status", "pending")))] == 0
    assert found[(f"{P}_queue_rows", (("kind", "ask"), ("status", "pending")))] == 0
    assert found[(f"{P}_store_up", ())] == 1
    budget = (await env.client.get("/budget")).json()
    for window in budget["windows"]:
        labels = (("window", window["name"]),)
        assert found[(f"{P}_budget_limit_tokens", labels)] == window["limit"]
        assert found[(f"{P}_budget_utilisation_ratio", labels)] == window["utilisation"]
    assert found[(f"{P}_budget_rung", (("rung", budget["mode"]),))] == 1


def test_the_estimates_accuracy_is_read_from_the_ledger(tmp_path: Path) -> None:
    store = new_sqlite_store(tmp_path / "s.db")
    try:
        rows = [  # engine, used, estimated, stop, reserved hours ago
            ("openai_compatible", 9_000, 12_000, "completed", 1),
            ("openai_compatible", 3_000, 4_000, "completed", 2),
            ("openai_compatible", 50, 4_000, "timeout", 2),      # not a completed run
            ("openai_compatible", 1_000, 1_000, "completed", 30),  # older than a day
            ("claude_code", 40_000, 20_000, "completed", 3),
            ("claude_code", 40_000, None, "completed", 3),        # never estimated
        ]
        with store.transaction() as tx:
            for i, (engine, used, guessed, stop, hours) in enumerate(rows):
                at = to_db_time(NOW - timedelta(hours=hours))
                tx.execute(
                    "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                    " used_tokens, usage_confidence, engine, reserved_at, settled_at,"
                    " stop_reason, estimated_tokens) VALUES (?, 'w', 1, 'full', 60000, ?,"
                    " 'exact', ?, ?, ?, ?, ?)", (f"k{i}", used, engine, at, at, stop, guessed))
        config = BudgetConfig(session_tokens=100_000, weekly_tokens=1_000_000,
                              max_run_tokens=10_000)
        governor = Governor(store, config, clock=lambda: NOW, publish=False)
        found = samples(render(Metrics(), StoreState(store, governor, lambda: NOW), {}))
    finally:
        store.close()
    assert found[(f"{P}_estimate_ratio", (("engine", "openai_compatible"),))] == 0.75
    assert found[(f"{P}_estimate_runs", (("engine", "openai_compatible"),))] == 2
    assert found[(f"{P}_estimate_ratio", (("engine", "claude_code"),))] == 2.0
