"""The simulator's search API and GitHub's limits at an organisation's scale: pull
requests found by ``updated:>=`` within what the token can see, a bucket of their own,
an index that lags, and an installation's limit that grows with its repositories."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.simulator.clock import iso
from tests.simulator.harness import REPO, Harness, auth
from tests.simulator_fixtures import harness_sim, harness_token

__all__ = ["harness_sim", "harness_token"]  # the fixtures


async def _search(sim: Harness, token: str, q: str, **params: object):  # type: ignore[no-untyped-def]
    return await sim.client.get("/search/issues", params={"q": q, **params},
                                headers=auth(token))


@pytest.mark.anyio
async def test_pull_requests_updated_since_are_found_within_the_installation(
        sim: Harness, token: str) -> None:
    sim.world.clock.advance(60)
    since = sim.world.now()
    sim.world.add_repository("acme/tools")  # not in the installation
    sim.world.add_pull("acme/tools", title="New", user="alice", head_sha="c" * 40,
                       base_sha="a" * 40, diff="")
    sim.world.add_repository("other/thing")
    sim.world.add_pull("other/thing", title="Elsewhere", user="alice", head_sha="d" * 40,
                       base_sha="a" * 40, diff="")
    answer = await _search(sim, token, f"is:pr updated:>={iso(since)} org:acme",
                           sort="updated", order="desc", per_page=100)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert answer.headers["x-ratelimit-resource"] == "search"
    assert answer.headers["x-ratelimit-limit"] == "30"
    # The installation does not see acme/tools; #1 in acme/widgets is older than `since`.
    assert body["total_count"] == 0 and body["items"] == []
    sim.world.touch(sim.pull.issue)
    found = (await _search(sim, token, f"is:pr updated:>={iso(since)} org:acme")).json()
    assert [(i["repository_url"].rsplit("/repos/", 1)[1], i["number"]) for i in
            found["items"]] == [(REPO, 1)]
    assert "pull_request" in found["items"][0]
    bad = await _search(sim, token, "is:pr label:bug")
    assert bad.status_code == 422


@pytest.mark.anyio
async def test_an_update_is_found_only_once_indexed(sim: Harness, token: str) -> None:
    sim.world.settings.search_lag_seconds = 30
    since = sim.world.now() - timedelta(seconds=1)
    sim.world.touch(sim.pull.issue)
    assert (await _search(sim, token, f"is:pr updated:>={iso(since)}")).json()["items"] == []
    sim.world.clock.advance(30)
    assert len((await _search(sim, token, f"is:pr updated:>={iso(since)}")).json()["items"]) == 1


@pytest.mark.anyio
async def test_search_has_its_own_bucket_of_thirty_a_minute(sim: Harness, token: str) -> None:
    for _ in range(30):
        assert (await _search(sim, token, "is:pr")).status_code == 200
    refused = await _search(sim, token, "is:pr")
    assert refused.status_code == 403 and "rate limit" in refused.json()["message"]
    core = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
    assert core.status_code == 200 and core.headers["x-ratelimit-resource"] == "core"
    sim.world.clock.advance(61)
    assert (await _search(sim, token, "is:pr")).status_code == 200


def test_an_installations_limit_grows_with_its_repositories() -> None:
    sim = Harness.create()
    key = f"installation:{sim.installation.id}"
    assert sim.world.limiter.limit_of(key) == 5000
    for n in range(38):  # the harness's two, and 38: 40
        repo = sim.world.add_repository(f"acme/r{n}")
        sim.installation.repository_ids.add(repo.id)
    assert sim.world.limiter.limit_of(key) == 5000 + 50 * 20
    for n in range(38, 400):
        repo = sim.world.add_repository(f"acme/r{n}")
        sim.installation.repository_ids.add(repo.id)
    assert sim.world.limiter.limit_of(key) == 12_500
    assert sim.world.limiter.limit_of("app:4242") == 5000
