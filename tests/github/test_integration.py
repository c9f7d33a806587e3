"""The real GitHub client against the GitHub simulator: authentication and tokens,
conditional requests and token rotation, pagination, installations, reviews, reactions.

Everything here goes through ``GitHubClient(..., transport=SimulatorTransport(world))``
with an App key generated at run time, ``AppJWT`` and ``InstallationTokens``. The
client's clock *is* the simulator's (frozen) clock, optionally skewed, and the injected
sleep records each wait and advances that clock, so an hour passes without waiting.
Rate limits and faults are in ``tests/github/test_integration_faults.py``; the standalone
simulator over loopback, GHES paths, diffs and webhook deliveries in
``tests/github/test_integration_standalone.py``. The shared set-up (``make_env``, the leak
guard) is ``tests/github_env.py``'s.

Every test ends with the leak guard: no installation token, JWT, line of the private key
or webhook secret may appear in any log record (captured at DEBUG) or in the string,
repr or traceback of any exception a test saw.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

import jwt as pyjwt
import pytest

from service.github.actors import APP
from service.github.client import JSON_MEDIA
from service.github.conditional import cache_key, resource_key, token_fingerprint
from service.github.errors import Forbidden, NotFound, Unauthorized, Unprocessable
from service.github.installations import (
    find_repository_installation,
    list_installation_repositories,
    list_installations,
)
from tests.github_env import (
    PR1,
    PULLS,
    START,
    Env,
    LeakGuard,
    MakeEnv,
    env,
    guard,
    make_env,
    remaining,
)
from tests.simulator import Settings
from tests.simulator.harness import API, APP_ID, REPO
from tests.simulator.records import fingerprint


# -- App JWT ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_app_jwt_is_accepted_and_finds_the_installation(env: Env) -> None:
    assert await find_repository_installation(env.client, "acme", "widgets") == env.inst
    app = await env.client.get_json(APP, "/app")
    assert app["id"] == APP_ID
    installations = [i async for i in list_installations(env.client)]
    assert [(i.id, i.account, i.suspended) for i in installations] == [(env.inst, "acme", False)]
    repos = [r.full_name async for r in list_installation_repositories(env.client, env.inst)]
    assert sorted(repos) == ["acme/gadgets", "acme/widgets"]
    (sent,) = env.jwts.issued
    claims = pyjwt.decode(sent, options={"verify_signature": False})
    now = int(START.timestamp())
    assert (claims["iat"], claims["exp"], claims["iss"]) == (now - 60, now + 540, str(APP_ID))
    # Every App route carried the JWT; the installation route carried the token.
    app_calls = [r for r in env.world.requests if r.path.startswith(("/app", "/repos/"))]
    assert {r.credential for r in app_calls} == {fingerprint(sent)}
    (listing,) = env.world.requests.matching("GET", "/installation/repositories")
    assert listing.credential == fingerprint(env.tokens.cached(env.inst).token)  # type: ignore[union-attr]

__all__ = ["env", "guard", "make_env"]  # the fixtures


@pytest.mark.anyio
async def test_a_client_clock_30_seconds_fast_is_still_accepted(make_env: MakeEnv) -> None:
    env = await make_env(skew=30)
    pulls = await env.client.get_json(env.inst, PULLS)
    assert [p["number"] for p in pulls] == [1]
    assert [r.status for r in env.mints()] == [201]


@pytest.mark.anyio
async def test_a_client_clock_two_minutes_fast_is_refused_as_github_would(
        make_env: MakeEnv, guard: LeakGuard) -> None:
    # The 60 s back-dating of `iat` covers a fast clock up to a minute, no more: GitHub
    # refuses an `iat` in its future. The client must surface that, not loop on it.
    env = await make_env(skew=120)
    error = await guard.raises(Unauthorized, env.client.get_json(env.inst, PULLS))
    assert "'Issued at' claim ('iat')" in error.message
    assert error.path == f"/app/installations/{env.inst}/access_tokens"
    assert len(env.mints()) == 1
    # GitHub's `Date` told the client how far off its clock is; the operator is told.
    (warning,) = [r for r in guard.caplog.records if "host clock differs" in r.getMessage()]
    assert warning.clock_offset_seconds == -120.0


@pytest.mark.anyio
async def test_a_repository_without_the_app_is_not_found(
        env: Env, guard: LeakGuard) -> None:
    error = await guard.raises(
        NotFound, find_repository_installation(env.client, "acme", "nowhere"))
    assert error.status == 404


# -- installation tokens ------------------------------------------------------------------------
@pytest.mark.anyio
async def test_many_concurrent_callers_share_one_token_mint(env: Env) -> None:
    results = await asyncio.gather(*(env.client.get_json(env.inst, PR1) for _ in range(25)))
    assert {r["number"] for r in results} == {1}
    assert len(env.mints()) == 1
    reads = env.world.requests.matching("GET", PR1)
    assert len(reads) == 25
    assert len({r.credential for r in reads}) == 1
    assert env.tokens.mints == 1


@pytest.mark.anyio
async def test_the_token_is_replaced_before_it_expires(env: Env) -> None:
    await env.client.get_json(env.inst, PR1)
    first = env.tokens.cached(env.inst)
    assert first is not None
    assert first.expires_at == START + timedelta(hours=1)
    env.world.clock.advance(54 * 60)
    await env.client.get_json(env.inst, PR1)
    assert len(env.mints()) == 1  # 6 minutes left: still used
    env.world.clock.advance(60 + 1)  # 55 min 1 s: under 5 minutes left
    await asyncio.gather(*(env.client.get_json(env.inst, PR1) for _ in range(10)))
    assert len(env.mints()) == 2  # the refresh is single-flight too
    reads = env.world.requests.matching("GET", PR1)
    assert reads[1].credential == reads[0].credential
    current = fingerprint(await env.client.installation_token(env.inst))
    assert {r.credential for r in reads[2:]} == {current}
    assert reads[2].credential != reads[0].credential
    assert reads[2].at < first.expires_at  # replaced while the old one still worked
    assert {r.status for r in reads} == {200}


@pytest.mark.anyio
async def test_a_token_github_considers_expired_is_replaced_after_one_401(
        make_env: MakeEnv) -> None:
    # The host clock runs 6 minutes slow: the client believes its token has 4 more
    # minutes of life when GitHub has already expired it.
    env = await make_env(skew=-360)
    await env.client.get_json(env.inst, PR1)
    env.world.clock.advance(3600 + 10)
    pull = await env.client.get_json(env.inst, PR1)
    assert pull["number"] == 1
    reads = env.world.requests.matching("GET", PR1)
    assert [r.status for r in reads] == [200, 401, 200]
    assert len({r.credential for r in reads}) == 2
    assert [r.status for r in env.mints()] == [201, 201]


@pytest.mark.anyio
async def test_a_revoked_token_is_replaced_after_one_401(env: Env) -> None:
    await env.client.request(env.inst, "DELETE", "/installation/token")
    pull = await env.client.get_json(env.inst, PR1)
    assert pull["number"] == 1
    (read_401, read_ok) = env.world.requests.matching("GET", PR1)
    assert (read_401.status, read_ok.status) == (401, 200)
    assert len(env.mints()) == 2


@pytest.mark.anyio
async def test_a_token_refused_twice_is_unauthorized(env: Env, guard: LeakGuard) -> None:
    env.world.faults.add(path_glob=PR1, status=401, body={"message": "Bad credentials"},
                         times=None)
    error = await guard.raises(Unauthorized, env.client.get_json(env.inst, PR1))
    assert (error.status, error.message) == (401, "Bad credentials")
    assert len(env.world.requests.matching("GET", PR1)) == 2
    assert len(env.mints()) == 2


@pytest.mark.anyio
async def test_tokens_are_opaque_in_both_of_githubs_formats(make_env: MakeEnv) -> None:
    for stateless in (True, False):
        env = await make_env(settings=Settings(stateless_tokens=stateless))
        await env.client.get_json(env.inst, PR1)
        token = await env.client.installation_token(env.inst)
        assert token.startswith("ghs_")
        assert (len(token) > 100) is stateless


# -- conditional requests ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_unchanged_resource_answers_304_without_costing_rate_limit(env: Env) -> None:
    first = await env.client.get_conditional(env.inst, PR1)
    assert (first.status, first.not_modified, first.data["number"]) == (200, False, 1)
    before = remaining(env)
    second = await env.client.get_conditional(env.inst, PR1)
    assert (second.status, second.not_modified, second.data) == (304, True, None)
    assert remaining(env) == before
    known = env.client.rate_limit(env.inst)
    assert known is not None
    assert known.remaining == before
    sent = env.world.requests.matching("GET", PR1)[-1]
    assert sent.header("if-none-match") == first.etag
    assert sent.header("if-modified-since") == first.last_modified
    stats = env.client.conditional_stats
    assert (stats.first_requests, stats.sent_validators, stats.not_modified) == (1, 1, 1)


@pytest.mark.anyio
async def test_a_changed_resource_answers_200_with_the_new_content(env: Env) -> None:
    await env.client.get_conditional(env.inst, PR1)
    env.world.clock.advance(30)
    env.world.edit_pull(REPO, 1, title="Add structured logging")
    changed = await env.client.get_conditional(env.inst, PR1)
    assert (changed.status, changed.not_modified) == (200, False)
    assert changed.data["title"] == "Add structured logging"
    again = await env.client.get_conditional(env.inst, PR1)
    assert again.not_modified


@pytest.mark.anyio
async def test_a_list_endpoint_is_conditional_too(env: Env) -> None:
    params = {"state": "all", "sort": "updated", "direction": "desc"}
    first = await env.client.get_conditional(env.inst, PULLS, params)
    assert [p["number"] for p in first.data] == [1]
    assert (await env.client.get_conditional(env.inst, PULLS, params)).not_modified
    env.world.clock.advance(60)
    env.world.add_pull(REPO, title="Second", user="bob", head_sha="c" * 40, base_sha="a" * 40,
                       diff="")
    changed = await env.client.get_conditional(env.inst, PULLS, params)
    assert [p["number"] for p in changed.data] == [2, 1]


@pytest.mark.anyio
async def test_after_rotation_the_first_request_is_a_full_200_counted_as_rotation(
        env: Env) -> None:
    await env.client.get_conditional(env.inst, PR1)
    assert (await env.client.get_conditional(env.inst, PR1)).not_modified
    old = await env.client.installation_token(env.inst)
    env.world.clock.advance(56 * 60)
    rotated = await env.client.get_conditional(env.inst, PR1)
    assert (rotated.status, rotated.not_modified) == (200, False)
    # The cache now holds the new token's validators only: one entry per resource.
    new = await env.client.installation_token(env.inst)
    resource = resource_key(env.inst, JSON_MEDIA, API + PR1)
    assert env.etags.get_validators(cache_key(resource, token_fingerprint(old))) is None
    stored = env.etags.get_validators(cache_key(resource, token_fingerprint(new)))
    assert stored is not None
    assert stored.etag == rotated.etag
    reads = env.world.requests.matching("GET", PR1)
    assert reads[-1].header("if-none-match") is None  # never another token's validators
    assert reads[-1].credential != reads[0].credential
    stats = env.client.conditional_stats
    assert (stats.first_requests, stats.after_rotation, stats.not_modified) == (1, 1, 1)
    assert (await env.client.get_conditional(env.inst, PR1)).not_modified


@pytest.mark.anyio
async def test_rotation_costs_about_one_full_200_per_hour_of_polling(env: Env) -> None:
    """Six simulated hours of 5-minute polls of one unchanged endpoint (the figure in
    docs/PERFORMANCE.md comes from this test)."""
    statuses: list[int] = []
    for _ in range(6 * 12):
        result = await env.client.get_conditional(env.inst, PULLS)
        statuses.append(result.status)
        env.world.clock.advance(5 * 60)
    stats = env.client.conditional_stats
    full = statuses.count(200)
    assert stats.first_requests == 1
    # Tokens are replaced every 55 minutes (5 before their hour is up): polls at
    # 55, 110, ..., 330 min each pay one 200.
    assert stats.after_rotation == 6
    assert full == stats.first_requests + stats.after_rotation
    assert statuses.count(304) == stats.not_modified == 72 - 7
    assert len(env.mints()) == 7
    assert stats.after_rotation / 6 == pytest.approx(1.0)  # per hour
    # 304s were free: the primary limit saw only the 200s in the current window.
    used = 5000 - remaining(env)
    assert used <= 2


# -- pagination --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_pagination_follows_link_over_three_pages(env: Env) -> None:
    for n in range(250):
        env.world.add_issue_comment(REPO, 1, user="bob", body=f"comment {n}")
    path = f"/repos/{REPO}/issues/1/comments"
    bodies = [c["body"] async for c in env.client.paginate(env.inst, path)]
    assert bodies == [f"comment {n}" for n in range(250)]
    pages = env.world.requests.matching("GET", path)
    assert [r.query.get("page") for r in pages] == [None, ["2"], ["3"]]
    assert all(r.query["per_page"] == ["100"] for r in pages)


# -- reviews and reactions ---------------------------------------------------------------------
def review(line: int) -> dict[str, Any]:
    return {"commit_id": "b" * 40, "event": "COMMENT", "body": "Automated review",
            "comments": [
                {"path": "src/app.py", "line": 3, "side": "RIGHT", "body": "json unused?"},
                {"path": "src/app.py", "line": line, "side": "RIGHT", "body": "check this"}]}


@pytest.mark.anyio
async def test_a_review_with_one_out_of_hunk_comment_fails_whole(
        env: Env, guard: LeakGuard) -> None:
    path = f"{PR1}/reviews"
    error = await guard.raises(Unprocessable, env.client.post_json(env.inst, path, review(15)))
    assert error.status == 422
    assert error.message == "Unprocessable Entity"
    assert any("could not be resolved" in str(e) for e in error.errors)
    assert error.request_id  # GitHub's x-github-request-id, for a support ticket
    assert not env.world.reviews and not env.world.review_comments
    posted = await env.client.post_json(env.inst, path, review(22))
    assert posted["state"] == "COMMENTED"
    assert posted["commit_id"] == "b" * 40
    assert len(env.world.review_comments) == 2
    assert [r.status for r in env.world.requests.matching("POST", path)] == [422, 200]


@pytest.mark.anyio
async def test_a_reaction_is_201_when_new_and_200_when_repeated(env: Env) -> None:
    comment = env.world.add_issue_comment(REPO, 1, user="alice", body="/review")
    path = f"/repos/{REPO}/issues/comments/{comment.id}/reactions"
    first = await env.client.request(env.inst, "POST", path, json={"content": "eyes"},
                                     idempotent=True)
    second = await env.client.request(env.inst, "POST", path, json={"content": "eyes"},
                                      idempotent=True)
    assert (first.status_code, second.status_code) == (201, 200)
    assert first.json()["id"] == second.json()["id"]
    assert len(comment.reactions) == 1


@pytest.mark.anyio
async def test_a_missing_permission_is_forbidden_not_a_rate_limit(
        env: Env, guard: LeakGuard) -> None:
    # Installed with pull_requests: read only. A reaction on a PR's conversation comment
    # needs pull_requests: write in practice (whatever the docs table says).
    env.harness.installation.permissions["pull_requests"] = "read"
    comment = env.world.add_issue_comment(REPO, 1, user="alice", body="/review")
    error = await guard.raises(Forbidden, env.client.post_json(
        env.inst, f"/repos/{REPO}/issues/comments/{comment.id}/reactions",
        {"content": "eyes"}, idempotent=True))
    assert error.message == "Resource not accessible by integration"
    assert error.accepted_permissions == "pull_requests=write"
    assert env.sleep.waits == []  # a permission 403 is not waited on
    assert not comment.reactions


# -- the guard itself --------------------------------------------------------------------------
def test_the_leak_guard_finds_a_logged_secret(caplog: pytest.LogCaptureFixture) -> None:
    probe = LeakGuard(caplog)
    caplog.set_level(logging.DEBUG)
    probe.secret_sources.append(lambda: ["ghs_probe_secret"])
    logging.getLogger("service.github").debug("sent", extra={"header": "ghs_probe_secret"})
    with pytest.raises(AssertionError, match="leaked"):
        probe.check()
    caplog.clear()
    probe.check()
