"""The simulator's webhook delivery log: every attempt a sender makes is an entry, listed
newest first with cursor pagination, read whole with its request, and redelivered under
its guid — as GitHub's ``/app/hook/deliveries`` endpoints answer."""

from __future__ import annotations

import httpx
import pytest

from tests.simulator.harness import Harness, bearer
from tests.simulator.webhooks import WebhookSender
from tests.simulator_fixtures import harness_sim

__all__ = ["harness_sim"]  # the fixtures


def _app(status: int) -> httpx.MockTransport:
    return httpx.MockTransport(lambda request: httpx.Response(status))


async def _sender(sim: Harness, status: int) -> WebhookSender:
    client = httpx.AsyncClient(transport=_app(status), base_url="http://service")
    return WebhookSender(client, url="/github/webhook", secret="s", app_id=sim.app.id,
                         log=sim.world.hook_log)


@pytest.mark.anyio
async def test_each_attempt_is_logged_with_its_outcome_newest_first(sim: Harness) -> None:
    payload = sim.world.payloads.pull_request("opened", sim.pull)
    ok, down = await _sender(sim, 202), await _sender(sim, 503)
    await ok.send("pull_request", payload)
    failed = down.build("pull_request", payload)
    await down.post(failed)
    down.lose(down.build("issue_comment", {"action": "created"}))
    await ok.post(ok.build("ping", {}), timed_out=True)
    listed = (await sim.client.get("/app/hook/deliveries", headers=bearer(sim.jwt()))).json()
    assert [(d["event"], d["status"], d["status_code"]) for d in listed] == [
        ("ping", "timed out", 0), ("issue_comment", "failed to connect to host", 0),
        ("pull_request", "Invalid HTTP Response: 503", 503), ("pull_request", "OK", 202)]
    assert listed[2]["guid"] == failed.delivery_id and listed[2]["action"] == "opened"
    assert listed[2]["installation_id"] == sim.installation.id
    failures = await sim.client.get("/app/hook/deliveries", params={"status": "failure"},
                                    headers=bearer(sim.jwt()))
    assert len(failures.json()) == 3
    whole = (await sim.client.get(f"/app/hook/deliveries/{listed[2]['id']}",
                                  headers=bearer(sim.jwt()))).json()
    assert whole["request"]["payload"] == payload
    assert whole["request"]["headers"]["X-GitHub-Event"] == "pull_request"


@pytest.mark.anyio
async def test_pages_follow_a_cursor_and_entries_go_after_three_days(sim: Harness) -> None:
    ok = await _sender(sim, 202)
    for _ in range(5):
        await ok.send("ping", {})
    first = await sim.client.get("/app/hook/deliveries", params={"per_page": 2},
                                 headers=bearer(sim.jwt()))
    ids = [d["id"] for d in first.json()]
    link = first.headers["link"]
    assert 'rel="next"' in link and f"cursor=v1_{ids[-1]}" in link
    following = await sim.client.get(link[1:link.index(">")], headers=bearer(sim.jwt()))
    assert [d["id"] for d in following.json()] == [ids[-1] - 1, ids[-1] - 2]
    sim.world.clock.advance(3 * 86_400 + 1)
    assert (await sim.client.get("/app/hook/deliveries", headers=bearer(sim.jwt()))).json() == []
    assert (await sim.client.get(f"/app/hook/deliveries/{ids[0]}",
                                 headers=bearer(sim.jwt()))).status_code == 404


@pytest.mark.anyio
async def test_a_redelivery_is_queued_under_the_same_guid(sim: Harness) -> None:
    down = await _sender(sim, 503)
    failed = down.build("pull_request", sim.world.payloads.pull_request("opened", sim.pull))
    await down.post(failed)
    entry = sim.world.hook_log.attempts[-1]
    answer = await sim.client.post(f"/app/hook/deliveries/{entry.id}/attempts",
                                   headers=bearer(sim.jwt()))
    assert answer.status_code == 202
    queued = sim.world.events[-1]
    assert (queued.delivery_id, queued.redelivery) == (failed.delivery_id, True)
    ok = await _sender(sim, 202)
    await ok.send_emitted(sim.world.events.pop())
    assert [(a.status, a.redelivery) for a in sim.world.hook_log.of(failed.delivery_id)] == [
        ("Invalid HTTP Response: 503", False), ("OK", True)]
    # Past the redelivery window, the entry is listed but no longer sent again.
    sim.world.hook_log.redeliver_days = 0
    sim.world.clock.advance(60)
    refused = await sim.client.post(f"/app/hook/deliveries/{entry.id}/attempts",
                                    headers=bearer(sim.jwt()))
    assert refused.status_code == 422
