"""The simulator's check runs meet GitHub's rules: ``checks: write``, a commit the
repository has, the statuses and conclusions GitHub accepts (a conclusion completes a run,
``completed`` needs one), ``output``'s title, summary and limits, only the App that made a
run changes it, and the listing for a commit with its filters and wrapper."""

from __future__ import annotations

from typing import Any

import pytest

from tests.simulator.harness import REPO, Harness, auth
from tests.simulator_fixtures import harness_sim, harness_token

__all__ = ["harness_sim", "harness_token"]  # the fixtures

RUNS = f"/repos/{REPO}/check-runs"
HEAD = "b" * 40





def run(**extra: Any) -> dict[str, Any]:
    return {"name": "pr-review-agent", "head_sha": HEAD, "external_id": "k1",
            "output": {"title": "Queued", "summary": "Waiting."}, **extra}


@pytest.mark.anyio
async def test_a_run_is_created_updated_completed_and_listed(sim: Harness, token: str) -> None:
    created = await sim.client.post(RUNS, headers=auth(token), json=run(status="queued"))
    assert created.status_code == 201
    body = created.json()
    assert (body["status"], body["conclusion"], body["external_id"]) == ("queued", None, "k1")
    assert body["app"]["id"] == sim.app.id and body["output"]["title"] == "Queued"

    done = await sim.client.patch(f"{RUNS}/{body['id']}", headers=auth(token), json={
        "conclusion": "success", "output": {"title": "Reviewed", "summary": "Fine."}})
    assert done.status_code == 200
    assert (done.json()["status"], done.json()["conclusion"]) == ("completed", "success")
    assert done.json()["completed_at"] is not None

    await sim.client.post(RUNS, headers=auth(token), json=run(name="other", external_id="k2"))
    listed = await sim.client.get(f"/repos/{REPO}/commits/{HEAD}/check-runs",
                                  headers=auth(token),
                                  params={"check_name": "pr-review-agent", "filter": "all"})
    assert listed.status_code == 200
    page = listed.json()
    assert page["total_count"] == 1 and page["check_runs"][0]["external_id"] == "k1"


@pytest.mark.anyio
@pytest.mark.parametrize(("payload", "message"), [
    (run(status="completed"), "conclusion can't be blank"),
    (run(status="done"), "status is not included"),
    (run(conclusion="green"), "conclusion is not included"),
    (run(head_sha="c" * 40), "No commit found for SHA"),
    (run(output={"title": "t"}), '"summary" wasn\'t supplied'),
    (run(output={"title": "t", "summary": "s" * 65536}), "too long"),
    (run(details_url="ftp://x"), "valid URL"),
    ({"head_sha": HEAD}, '"name" wasn\'t supplied'),
])
async def test_what_github_refuses_is_a_422(sim: Harness, token: str, payload: dict[str, Any],
                                            message: str) -> None:
    response = await sim.client.post(RUNS, headers=auth(token), json=payload)
    assert response.status_code == 422
    assert message in response.json()["message"] + str(response.json().get("errors"))
    assert sim.world.check_runs == {}


@pytest.mark.anyio
async def test_without_checks_write_it_is_a_403_naming_the_permission(sim: Harness) -> None:
    token = await sim.mint_token({"permissions": {"pull_requests": "write"}})
    response = await sim.client.post(RUNS, headers=auth(token), json=run())
    assert response.status_code == 403
    assert response.headers["x-accepted-github-permissions"] == "checks=write"


@pytest.mark.anyio
async def test_only_the_app_that_made_a_run_may_change_it(sim: Harness, token: str) -> None:
    made = (await sim.client.post(RUNS, headers=auth(token), json=run())).json()
    sim.world.check_runs[made["id"]].app_id = sim.app.id + 1  # another App's run
    response = await sim.client.patch(f"{RUNS}/{made['id']}", headers=auth(token),
                                      json={"status": "in_progress"})
    assert response.status_code == 403 and "Invalid app_id" in response.text
