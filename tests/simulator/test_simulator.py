"""The GitHub simulator behaves like GitHub: authentication, conditional requests,
pagination, rate limits, faults, the request record, and the standalone server."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
import httpx
import jwt as pyjwt
import pytest

from tests.kit.paths import CHECKOUT
from tests.kit.processes import SimulatorProcess
from tests.simulator import Settings, SimulatorTransport, sign
from tests.simulator.auth import EXP_INVALID, EXP_TOO_FAR, IAT_INVALID, generate_app_key
from tests.simulator.harness import APP_ID, REPO, Harness, app_key_pair, auth, bearer
from tests.simulator_fixtures import harness_sim

__all__ = ["harness_sim"]  # the fixtures

ROOT = CHECKOUT




# -- JWT ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_valid_jwt_reads_the_app(sim: Harness) -> None:
    response = await sim.client.get("/app", headers=bearer(sim.jwt()))
    assert response.status_code == 200
    assert response.json()["id"] == APP_ID
    assert response.json()["slug"] == "pr-reviewer"


@pytest.mark.anyio
async def test_expired_jwt_is_rejected_with_githubs_message(sim: Harness) -> None:
    now = sim.world.clock.timestamp()
    token = sim.jwt(iat=now - 700, exp=now - 10)
    response = await sim.client.get("/app", headers=bearer(token))
    assert response.status_code == 401
    assert response.json()["message"] == EXP_INVALID


@pytest.mark.anyio
async def test_exp_more_than_ten_minutes_ahead_is_too_far(sim: Harness) -> None:
    now = sim.world.clock.timestamp()
    response = await sim.client.get("/app", headers=bearer(sim.jwt(exp=now + 660)))
    assert response.status_code == 401
    assert response.json()["message"] == EXP_TOO_FAR


@pytest.mark.anyio
async def test_exactly_600s_from_a_fast_client_clock_is_too_far(sim: Harness) -> None:
    now = sim.world.clock.timestamp() + 3  # the client's clock runs 3 s fast
    response = await sim.client.get("/app", headers=bearer(sim.jwt(iat=now - 60, exp=now + 600)))
    assert response.status_code == 401
    assert response.json()["message"] == EXP_TOO_FAR


@pytest.mark.anyio
async def test_fast_client_clock_30s_with_nine_minute_exp_is_accepted(sim: Harness) -> None:
    response = await sim.client.get("/app", headers=bearer(sim.jwt(client_skew=30)))
    assert response.status_code == 200


@pytest.mark.anyio
async def test_iat_in_the_future_is_rejected(sim: Harness) -> None:
    now = sim.world.clock.timestamp()
    response = await sim.client.get("/app", headers=bearer(sim.jwt(iat=now + 120,
                                                                   exp=now + 500)))
    assert response.status_code == 401
    assert response.json()["message"] == IAT_INVALID


@pytest.mark.anyio
async def test_jwt_signed_by_another_key_cannot_be_decoded(sim: Harness) -> None:
    other_private, _ = generate_app_key()
    response = await sim.client.get("/app", headers=bearer(sim.jwt(key=other_private)))
    assert response.status_code == 401
    assert response.json()["message"] == "A JSON web token could not be decoded"
    token = await sim.mint_token()
    response = await sim.client.get("/app", headers=bearer(token))
    assert response.json()["message"] == "A JSON web token could not be decoded"


@pytest.mark.anyio
async def test_enterprise_style_prefix() -> None:
    harness = Harness.create()
    transport = SimulatorTransport(harness.world, prefix="/api/v3")
    async with httpx.AsyncClient(transport=transport, base_url="https://ghe.test/api/v3") as c:
        app = await c.get("/app", headers=bearer(harness.jwt()))
        assert app.status_code == 200
        outside = await c.get("https://ghe.test/app", headers=bearer(harness.jwt()))
        assert outside.status_code == 404
    await harness.client.aclose()


# -- installation tokens -------------------------------------------------------------------
@pytest.mark.anyio
async def test_token_mint_shape_and_one_hour_expiry(sim: Harness) -> None:
    response = await sim.client.post(
        f"/app/installations/{sim.installation.id}/access_tokens", headers=bearer(sim.jwt()))
    assert response.status_code == 201
    body = response.json()
    token = body["token"]
    assert token.startswith(f"ghs_{APP_ID}_") and len(token) > 400 and token.count(".") == 2
    assert body["repository_selection"] == "selected"
    assert body["permissions"]["pull_requests"] == "write"
    expires = body["expires_at"]
    assert expires.endswith("Z")
    assert (await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))).status_code == 200
    sim.world.clock.advance(3599)
    assert (await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))).status_code == 200
    sim.world.clock.advance(2)
    expired = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
    assert expired.status_code == 401
    assert expired.json()["message"] == "Bad credentials"


@pytest.mark.anyio
async def test_classic_token_format_on_request(sim: Harness) -> None:
    token = await sim.mint_token(headers={"X-GitHub-Stateless-S2S-Token": "disabled"})
    assert token.startswith("ghs_") and len(token) == 40


@pytest.mark.anyio
async def test_scoped_token_cannot_see_other_repositories(sim: Harness) -> None:
    token = await sim.mint_token({"repositories": ["widgets"],
                                  "permissions": {"pull_requests": "read"}})
    assert (await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))).status_code == 200
    other = await sim.client.get("/repos/acme/gadgets/pulls", headers=auth(token))
    assert other.status_code == 404
    review = await sim.client.post(f"/repos/{REPO}/pulls/1/reviews", headers=auth(token),
                                   json={"event": "COMMENT", "body": "x"})
    assert review.status_code == 403
    assert review.headers["x-accepted-github-permissions"] == "pull_requests=write"
    escalate = await sim.client.post(
        f"/app/installations/{sim.installation.id}/access_tokens", headers=bearer(sim.jwt()),
        json={"permissions": {"administration": "write"}})
    assert escalate.status_code == 422


@pytest.mark.anyio
async def test_installation_lookups(sim: Harness) -> None:
    jwt_headers = bearer(sim.jwt())
    found = await sim.client.get(f"/repos/{REPO}/installation", headers=jwt_headers)
    assert found.json()["id"] == sim.installation.id
    assert (await sim.client.get("/repos/acme/unknown/installation",
                                 headers=jwt_headers)).status_code == 404
    listed = await sim.client.get("/app/installations", headers=jwt_headers)
    assert [i["id"] for i in listed.json()] == [sim.installation.id]
    token = await sim.mint_token()
    repos = await sim.client.get("/installation/repositories", headers=auth(token))
    assert repos.json()["total_count"] == 2
    assert {r["full_name"] for r in repos.json()["repositories"]} == {REPO, "acme/gadgets"}
    revoke = await sim.client.delete("/installation/token", headers=auth(token))
    assert revoke.status_code == 204
    assert (await sim.client.get("/installation/repositories",
                                 headers=auth(token))).status_code == 401


# -- conditional requests -----------------------------------------------------------------
@pytest.mark.anyio
async def test_etag_depends_on_token_and_304_is_free(sim: Harness) -> None:
    first, second = await sim.mint_token(), await sim.mint_token()
    a = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(first))
    a_again = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(first))
    b = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(second))
    assert a.json() == b.json()
    assert a.headers["etag"] == a_again.headers["etag"]
    assert a.headers["etag"] != b.headers["etag"]
    remaining = int(b.headers["x-ratelimit-remaining"])
    cached = await sim.client.get(f"/repos/{REPO}/pulls",
                                  headers={**auth(first), "If-None-Match": a.headers["etag"]})
    assert cached.status_code == 304
    assert cached.content == b""
    assert int(cached.headers["x-ratelimit-remaining"]) == remaining
    # Another token's ETag never matches: a full (counted) 200.
    rotated = await sim.client.get(f"/repos/{REPO}/pulls",
                                   headers={**auth(second), "If-None-Match": a.headers["etag"]})
    assert rotated.status_code == 200
    assert int(rotated.headers["x-ratelimit-remaining"]) == remaining - 1


@pytest.mark.anyio
async def test_etag_changes_with_content_and_media_type(sim: Harness) -> None:
    token = await sim.mint_token()
    before = await sim.client.get(f"/repos/{REPO}/pulls/1", headers=auth(token))
    diff = await sim.client.get(f"/repos/{REPO}/pulls/1",
                                headers={**auth(token), "Accept": "application/vnd.github.diff"})
    assert diff.headers["etag"] != before.headers["etag"]
    sim.world.edit_pull(REPO, 1, title="Renamed")
    after = await sim.client.get(f"/repos/{REPO}/pulls/1",
                                 headers={**auth(token), "If-None-Match": before.headers["etag"]})
    assert after.status_code == 200
    assert after.json()["title"] == "Renamed"


@pytest.mark.anyio
async def test_if_modified_since_on_a_single_pull(sim: Harness) -> None:
    token = await sim.mint_token()
    first = await sim.client.get(f"/repos/{REPO}/pulls/1", headers=auth(token))
    stamp = first.headers["last-modified"]
    same = await sim.client.get(f"/repos/{REPO}/pulls/1",
                                headers={**auth(token), "If-Modified-Since": stamp})
    assert same.status_code == 304
    sim.world.clock.advance(5)
    sim.world.edit_pull(REPO, 1, body="new body")
    changed = await sim.client.get(f"/repos/{REPO}/pulls/1",
                                   headers={**auth(token), "If-Modified-Since": stamp})
    assert changed.status_code == 200


# -- pagination ------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_link_pagination_walks_every_page(sim: Harness) -> None:
    for number in range(2, 8):
        sim.world.clock.advance(1)
        sim.world.add_pull(REPO, number=number, title=f"PR {number}", user="bob",
                           head_sha=f"{number:040d}", base_sha="a" * 40, diff="")
    token = await sim.mint_token()
    first = await sim.client.get(f"/repos/{REPO}/pulls", params={"per_page": 3},
                                 headers=auth(token))
    links = first.links
    assert set(links) == {"next", "last"}
    assert "page=3" in links["last"]["url"]
    seen = [p["number"] for p in first.json()]
    url: str | None = links["next"]["url"]
    while url:
        page = await sim.client.get(url, headers=auth(token))
        assert {"prev", "first"} <= set(page.links)
        seen += [p["number"] for p in page.json()]
        url = page.links.get("next", {}).get("url")
    assert seen == [7, 6, 5, 4, 3, 2, 1]  # sort=created, direction=desc by default


@pytest.mark.anyio
async def test_pull_listing_filters_and_sorts(sim: Harness) -> None:
    sim.world.clock.advance(10)
    sim.world.add_pull(REPO, number=2, title="two", user="bob", head_sha="c" * 40,
                       base_sha="a" * 40, diff="")
    sim.world.clock.advance(10)
    sim.world.add_pull(REPO, number=3, title="three", user="bob", head_sha="d" * 40,
                       base_sha="a" * 40, diff="")
    sim.world.clock.advance(10)
    sim.world.edit_pull(REPO, 1, title="touched")
    sim.world.close(REPO, 2)
    token = await sim.mint_token()

    async def numbers(**params: str) -> list[int]:
        response = await sim.client.get(f"/repos/{REPO}/pulls", params=params,
                                        headers=auth(token))
        return [p["number"] for p in response.json()]

    assert await numbers() == [3, 1]
    assert await numbers(state="closed") == [2]
    assert await numbers(state="all", sort="updated") == [3, 1, 2]
    assert await numbers(state="all", sort="updated", direction="desc") == [2, 1, 3]
    assert await numbers(state="all", direction="asc") == [1, 2, 3]
    simple = (await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))).json()[0]
    assert "mergeable" not in simple and {"head", "base", "draft", "user"} <= set(simple)


# -- rate limits -------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_primary_limit_exhaustion() -> None:
    harness = Harness.create(settings=Settings(rate_limit=3))
    async with harness.client:
        token = await harness.mint_token()
        statuses = []
        for _ in range(4):
            response = await harness.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
            statuses.append(response.status_code)
        assert statuses == [200, 200, 200, 403]
        assert response.headers["x-ratelimit-remaining"] == "0"
        assert response.headers["x-ratelimit-limit"] == "3"
        assert response.headers["x-ratelimit-resource"] == "core"
        assert "API rate limit exceeded" in response.json()["message"]
        reset = int(response.headers["x-ratelimit-reset"])
        harness.world.clock.set(datetime.fromtimestamp(reset + 1, UTC))
        again = await harness.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
        assert again.status_code == 401  # an hour later the token itself has expired
        fresh = await harness.mint_token()
        recovered = await harness.client.get(f"/repos/{REPO}/pulls", headers=auth(fresh))
        assert recovered.status_code == 200
        assert recovered.headers["x-ratelimit-remaining"] == "2"


@pytest.mark.anyio
async def test_secondary_content_limit_sends_retry_after() -> None:
    harness = Harness.create(settings=Settings(secondary_per_minute=2))
    async with harness.client:
        token = await harness.mint_token()
        url = f"/repos/{REPO}/issues/1/comments"
        for _ in range(2):
            ok = await harness.client.post(url, headers=auth(token), json={"body": "hi"})
            assert ok.status_code == 201
        limited = await harness.client.post(url, headers=auth(token), json={"body": "hi"})
        assert limited.status_code == 403
        assert "secondary rate limit" in limited.json()["message"]
        retry_after = int(limited.headers["retry-after"])
        assert 1 <= retry_after <= 60
        assert len(harness.world.issue_comments) == 2
        harness.world.clock.advance(retry_after)
        assert (await harness.client.post(url, headers=auth(token),
                                          json={"body": "hi"})).status_code == 201


@pytest.mark.anyio
async def test_secondary_hourly_budget_and_concurrency_limit() -> None:
    harness = Harness.create(settings=Settings(secondary_per_hour=2, max_concurrent=1))
    async with harness.client:
        token = await harness.mint_token()
        url = f"/repos/{REPO}/issues/1/reactions"
        for content in ("+1", "eyes"):
            harness.world.clock.advance(120)
            ok = await harness.client.post(url, headers=auth(token), json={"content": content})
            assert ok.status_code == 201
        limited = await harness.client.post(url, headers=auth(token), json={"content": "heart"})
        assert limited.status_code == 403
        assert 3000 < int(limited.headers["retry-after"]) <= 3600 - 120

        harness.world.faults.slow(path_glob="/repos/*/pulls", delay=0.3)
        statuses: list[int] = []

        async def fetch() -> None:
            response = await harness.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
            statuses.append(response.status_code)

        key = f"installation:{harness.installation.id}"
        async with anyio.create_task_group() as group:
            group.start_soon(fetch)
            with anyio.fail_after(5):
                while harness.world.limiter.in_flight(key) == 0:
                    await anyio.sleep(0.005)
            group.start_soon(fetch)  # arrives while the first is still in flight
        assert statuses == [403, 200]


# -- faults ----------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_fault_schedule_times_and_no_rate_cost(sim: Harness) -> None:
    token = await sim.mint_token()
    sim.world.faults.add(method="GET", path_glob="/repos/*/pulls", status=502, times=2)
    statuses = [(await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))).status_code
                for _ in range(3)]
    assert statuses == [502, 502, 200]
    last = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
    assert last.headers["x-ratelimit-used"] == "2"  # the two 502s cost nothing
    faulted = [r.fault for r in sim.world.requests.matching("GET", "/repos/*/pulls")]
    assert faulted == ["fault", "fault", None, None]


@pytest.mark.anyio
async def test_skip_lets_early_requests_through(sim: Harness) -> None:
    token = await sim.mint_token()
    sim.world.faults.server_error(path_glob="/repos/*/pulls/1", status=503, skip=1)
    first = await sim.client.get(f"/repos/{REPO}/pulls/1", headers=auth(token))
    second = await sim.client.get(f"/repos/{REPO}/pulls/1", headers=auth(token))
    assert (first.status_code, second.status_code) == (200, 503)
    assert second.json() == {"message": "Server Error"}


@pytest.mark.anyio
async def test_injected_secondary_limit_and_token_mint_failure(sim: Harness) -> None:
    sim.world.faults.fail_token_mint(status=500)
    failed = await sim.client.post(f"/app/installations/{sim.installation.id}/access_tokens",
                                   headers=bearer(sim.jwt()))
    assert failed.status_code == 500
    token = await sim.mint_token()
    sim.world.faults.secondary_limit(method="POST", retry_after=17)
    limited = await sim.client.post(f"/repos/{REPO}/issues/1/comments", headers=auth(token),
                                    json={"body": "x"})
    assert limited.status_code == 403
    assert limited.headers["retry-after"] == "17"
    assert "secondary rate limit" in limited.json()["message"]


@pytest.mark.anyio
async def test_connection_drops_raise_httpx_errors(sim: Harness) -> None:
    token = await sim.mint_token()
    sim.world.faults.drop(path_glob="/repos/*/pulls", kind="remote_protocol")
    with pytest.raises(httpx.RemoteProtocolError):
        await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
    sim.world.faults.drop(path_glob="/repos/*/pulls", kind="read_error")
    with pytest.raises(httpx.ReadError):
        await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))
    assert (await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token))).status_code == 200
    dropped = [r for r in sim.world.requests.matching("GET", "/repos/*/pulls") if r.fault]
    assert [r.status for r in dropped] == [None, None]


@pytest.mark.anyio
async def test_slow_fault_trips_the_client_read_timeout(sim: Harness) -> None:
    token = await sim.mint_token()
    sim.world.faults.slow(path_glob="/repos/*/pulls", delay=0.5)
    with pytest.raises(httpx.ReadTimeout):
        await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token), timeout=0.05)
    sim.world.faults.slow(path_glob="/repos/*/pulls", delay=0.05)
    slow = await sim.client.get(f"/repos/{REPO}/pulls", headers=auth(token), timeout=5)
    assert slow.status_code == 200


# -- the request record ---------------------------------------------------------------------------
@pytest.mark.anyio
async def test_request_record_keeps_what_was_sent_but_no_secrets(sim: Harness) -> None:
    token = await sim.mint_token()
    await sim.client.get(f"/repos/{REPO}/pulls", params={"state": "all"},
                         headers={**auth(token), "If-None-Match": 'W/"abc"'})
    await sim.client.post(f"/repos/{REPO}/issues/1/comments", headers=auth(token),
                          json={"body": "recorded"})
    get, post = sim.world.requests[-2], sim.world.requests[-1]
    assert get.query == {"state": ["all"]}
    assert get.header("if-none-match") == 'W/"abc"'
    assert post.json() == {"body": "recorded"} and post.status == 201 and post.is_write
    assert get.credential == post.credential
    everything = repr(list(sim.world.requests)) + "".join(
        json.dumps(r.headers) + r.body.decode() for r in sim.world.requests)
    assert token not in everything
    assert token[-40:] not in everything
    assert sim.private_key_pem[40:80] not in everything
    writes = sim.world.requests.writes()
    assert [w.path for w in writes][-1] == f"/repos/{REPO}/issues/1/comments"


# -- standalone -----------------------------------------------------------------------------------
def test_standalone_server_over_loopback(tmp_path: Path) -> None:
    private_pem, public_pem = app_key_pair()
    state = {
        "app": {"id": 77, "slug": "standalone-bot", "public_key_pem": public_pem.decode(),
                "webhook_secret": "w"},
        "repositories": [{"full_name": "acme/widgets"}],
        "installations": [{"id": 9, "account": "acme", "repositories": ["acme/widgets"]}],
        "pull_requests": [{"repo": "acme/widgets", "number": 5, "title": "t", "user": "alice",
                           "head": {"sha": "b" * 40, "ref": "f"},
                           "base": {"sha": "a" * 40}, "diff": ""}],
    }
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state))
    sim = SimulatorProcess(tmp_path, state=state_file)
    try:
        base_url = sim.url
        assert base_url.startswith("http://127.0.0.1:")
        with httpx.Client(base_url=base_url, timeout=10) as client:
            clock = client.get("/_simulator/clock").json()["now"]
            assert clock.endswith("Z")
            now = int(time.time())
            app_jwt = pyjwt.encode({"iat": now - 60, "exp": now + 540, "iss": "77"},
                                   private_pem, algorithm="RS256")
            minted = client.post("/app/installations/9/access_tokens",
                                 headers=bearer(app_jwt))
            assert minted.status_code == 201
            token = minted.json()["token"]
            pulls = client.get("/repos/acme/widgets/pulls", headers=auth(token))
            assert pulls.status_code == 200
            assert [p["number"] for p in pulls.json()] == [5]
            client.post("/_simulator/faults", json={"path_glob": "/repos/*/pulls",
                                                    "drop": "remote_protocol"})
            with pytest.raises(httpx.RemoteProtocolError):
                client.get("/repos/acme/widgets/pulls", headers=auth(token))
            recorded = client.get("/_simulator/requests").json()
            assert [r["status"] for r in recorded][-1] is None
            assert token not in json.dumps(recorded)
            # The App's comment emits a webhook; deliver it over loopback to a sink.
            client.post("/repos/acme/widgets/issues/5/comments", headers=auth(token),
                        json={"body": "on it"})
            delivered = client.post("/_simulator/webhooks/deliver",
                                    json={"url": f"{base_url}/webhook-sink"}).json()
            assert [d["event"] for d in delivered["delivered"]] == ["issue_comment"]
            sink = client.get("/_simulator/requests").json()[-1]
            assert sink["path"] == "/webhook-sink"
            assert sink["headers"]["x-github-event"] == "issue_comment"
            body = sink["body"].encode()
            assert sink["headers"]["x-hub-signature-256"] == sign("w", body)[0]
    finally:
        sim.close()
    assert sim.process.returncode == 0
    errors = sim.stderr()
    assert "ASGI callable" not in errors and "Traceback" not in errors
