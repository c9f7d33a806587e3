"""What a scrape reads from the store: the deliveries and the queue, and a store that is
down as a series, not a failed scrape."""

from __future__ import annotations

import pytest

from tests.observe.metrics.scrape import P, env, samples
from tests.webhook_env import Env

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
    assert found[(f"{P}_store_up", ())] == 1
    budget = (await env.client.get("/budget")).json()
    for window in budget["windows"]:
        labels = (("window", window["name"]),)
        assert found[(f"{P}_budget_limit_tokens", labels)] == window["limit"]
        assert found[(f"{P}_budget_utilisation_ratio", labels)] == window["utilisation"]
    assert found[(f"{P}_budget_rung", (("rung", budget["mode"]),))] == 1
