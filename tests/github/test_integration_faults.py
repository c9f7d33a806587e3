"""The real GitHub client against the GitHub simulator when GitHub pushes back: primary
and secondary rate limits, write spacing, 5xx, dropped connections, failed token mints
and slow responses.

The set-up (``make_env``, ``env``, the leak guard) is shared with
``tests/github/test_integration.py``: the client's clock is the simulator's frozen clock and
its sleep records each wait and advances that clock, so every wait is asserted exactly
and nothing really waits (except the read-timeout tests, which need real fractions of a
second).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from itertools import pairwise

import httpx
import pytest

from service.github.errors import Forbidden, RateLimited, ServerError
from service.github.ratelimit import RetryPolicy
from tests.github_env import (
    PR1,
    START,
    Env,
    LeakGuard,
    MakeEnv,
    env,
    guard,
    make_env,
)
from tests.simulator import Settings
from tests.simulator.harness import REPO

__all__ = ["env", "guard", "make_env"]  # the fixtures


COMMENTS = f"/repos/{REPO}/issues/1/comments"
FAST_TIMEOUT = httpx.Timeout(0.1)  # for the slow-response tests (real fractions of a second)


def key(env: Env) -> str:
    return f"installation:{env.inst}"


def statuses(env: Env, method: str, path: str) -> list[int | None]:
    return [r.status for r in env.world.requests.matching(method, path)]


# -- primary rate limit ---------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("skew", [0, 30, -90])
async def test_primary_limit_spent_waits_until_reset_then_succeeds(
        make_env: MakeEnv, skew: float) -> None:
    # x-ratelimit-reset is an instant on GitHub's clock: however wrong the host clock is,
    # the client waits exactly until then (measured against GitHub's `Date`), neither
    # waking early to ask again while limited nor oversleeping.
    env = await make_env(skew=skew)
    await env.client.get_json(env.inst, PR1)  # opens the hour's window at START
    env.world.clock.advance(50 * 60)
    env.world.limiter.set_remaining(key(env), 0, env.world.clock.timestamp())
    pull = await env.client.get_json(env.inst, PR1)
    assert pull["number"] == 1
    assert env.sleep.waits == [600.0]  # exactly until x-ratelimit-reset
    reads = env.world.requests.matching("GET", PR1)
    assert [r.status for r in reads] == [200, 403, 200]
    assert reads[2].at >= START + timedelta(hours=1)
    limit = env.client.rate_limit(env.inst)
    assert limit is not None
    assert limit.remaining == 4999


@pytest.mark.anyio
async def test_primary_limit_beyond_max_wait_raises_rate_limited(
        env: Env, guard: LeakGuard) -> None:
    await env.client.get_json(env.inst, PR1)
    env.world.limiter.set_remaining(key(env), 0, env.world.clock.timestamp())
    error = await guard.raises(RateLimited, env.client.get_json(env.inst, PR1))
    assert (error.kind, error.status) == ("primary", 403)
    assert error.resource == "core"
    assert error.until == START + timedelta(hours=1)
    assert "API rate limit exceeded" in error.message
    assert env.sleep.waits == []
    sent = len(env.world.requests)
    # Known to be spent: the next call does not spend a request GitHub would refuse.
    again = await guard.raises(RateLimited, env.client.get_json(env.inst, "/repos/acme/gadgets"))
    assert again.until == error.until
    assert len(env.world.requests) == sent


# -- secondary limits and write spacing ------------------------------------------------------
@pytest.mark.anyio
async def test_secondary_limit_mid_burst_waits_retry_after_and_posts_once(env: Env) -> None:
    env.world.faults.secondary_limit(method="POST", path_glob=COMMENTS, retry_after=30, skip=2)
    bodies = [f"finding {n}" for n in range(5)]
    await asyncio.gather(*(env.client.post_json(env.inst, COMMENTS, {"body": b})
                           for b in bodies))
    posted = sorted(c.body for c in env.world.issue_comments.values())
    assert posted == bodies  # each exactly once
    assert statuses(env, "POST", COMMENTS) == [201, 201, 403, 201, 201, 201]
    assert 30.0 in env.sleep.waits
    writes = env.world.requests.matching("POST", COMMENTS)
    gaps = [(b.at - a.at).total_seconds() for a, b in pairwise(writes)]
    assert min(gaps) >= 1.0
    assert gaps[2] >= 30.0  # the retry came Retry-After seconds after the refusal


@pytest.mark.anyio
async def test_githubs_content_creation_limit_is_waited_out(make_env: MakeEnv) -> None:
    env = await make_env(settings=Settings(secondary_per_minute=3))
    for n in range(5):
        await env.client.post_json(env.inst, COMMENTS, {"body": f"note {n}"})
    assert len(env.world.issue_comments) == 5
    assert statuses(env, "POST", COMMENTS) == [201, 201, 201, 403, 201, 201]
    # Writes at 0, 1, 2 s; the 4th is refused at 3 s with Retry-After 57 (when the first
    # leaves the minute), so it lands at 60 s.
    assert 57.0 in env.sleep.waits
    writes = env.world.requests.matching("POST", COMMENTS)
    assert writes[4].at - START == timedelta(seconds=60)


@pytest.mark.anyio
async def test_the_hourly_content_limit_beyond_max_wait_raises_rate_limited(
        make_env: MakeEnv, guard: LeakGuard) -> None:
    env = await make_env(settings=Settings(secondary_per_hour=2))
    for n in range(2):
        await env.client.post_json(env.inst, COMMENTS, {"body": f"note {n}"})
    error = await guard.raises(RateLimited,
                               env.client.post_json(env.inst, COMMENTS, {"body": "third"}))
    assert (error.kind, error.status) == ("secondary", 403)
    # Retry-After is when the first of the hour's writes (at START) leaves the window.
    assert error.until == START + timedelta(hours=1)
    assert len(env.world.issue_comments) == 2
    assert env.sleep.waits == [1.0, 1.0]  # only the write spacing: 3598 s is not slept


@pytest.mark.anyio
async def test_writes_are_spaced_per_installation_and_reads_are_not(env: Env) -> None:
    world = env.world
    world.add_repository("beta/tools")
    other = world.add_installation(account="beta", repositories=["beta/tools"])
    world.add_issue("beta/tools", title="Tracking", user="carol")
    other_comments = "/repos/beta/tools/issues/1/comments"
    await asyncio.gather(
        *(env.client.post_json(env.inst, COMMENTS, {"body": f"a{n}"}) for n in range(4)),
        *(env.client.post_json(other.id, other_comments, {"body": f"b{n}"}) for n in range(2)),
        *(env.client.get_json(env.inst, PR1) for _ in range(3)),
    )
    mine = [r.at for r in world.requests.matching("POST", COMMENTS)]
    theirs = [r.at for r in world.requests.matching("POST", other_comments)]
    for times in (mine, theirs):
        assert all((b - a).total_seconds() >= 1.0 for a, b in pairwise(times))
    # The other installation's writes and the reads are not queued behind this one's
    # writes. (The fake sleep advances the one shared clock at once, so "not queued" is
    # seen in the order of arrival rather than in equal timestamps.)
    order = [(r.method, r.path) for r in world.requests]
    second_of_mine = [i for i, item in enumerate(order) if item == ("POST", COMMENTS)][1]
    assert order.index(("POST", other_comments)) < second_of_mine
    assert max(i for i, item in enumerate(order) if item == ("GET", PR1)) < second_of_mine
    assert len(world.issue_comments) == 6


# -- server errors and dropped connections ------------------------------------------------------
@pytest.mark.anyio
async def test_a_burst_of_502s_on_a_get_is_retried(env: Env) -> None:
    env.world.faults.server_error(path_glob=PR1, status=502, times=3)
    pull = await env.client.get_json(env.inst, PR1)
    assert pull["number"] == 1
    assert statuses(env, "GET", PR1) == [502, 502, 502, 200]
    assert env.sleep.waits == [1.0, 2.0, 4.0]  # bounded exponential back-off


@pytest.mark.anyio
async def test_persistent_5xx_raises_server_error_at_the_bound(
        env: Env, guard: LeakGuard) -> None:
    env.world.faults.server_error(path_glob=PR1, status=503, times=None)
    error = await guard.raises(ServerError, env.client.get_json(env.inst, PR1))
    assert (error.status, error.path) == (503, PR1)
    assert statuses(env, "GET", PR1) == [503] * 4
    assert env.sleep.waits == [1.0, 2.0, 4.0]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["remote_protocol", "read_error"])
async def test_a_dropped_connection_on_a_get_is_retried(env: Env, kind: str) -> None:
    env.world.faults.drop(path_glob=PR1, kind=kind)  # type: ignore[arg-type]
    pull = await env.client.get_json(env.inst, PR1)
    assert pull["number"] == 1
    assert statuses(env, "GET", PR1) == [None, 200]
    assert env.sleep.waits == [1.0]


@pytest.mark.anyio
async def test_a_dropped_post_is_not_retried(env: Env, guard: LeakGuard) -> None:
    # The request may have reached GitHub: posting again could duplicate the comment.
    env.world.faults.drop(method="POST", path_glob=COMMENTS)
    error = await guard.raises(ServerError,
                               env.client.post_json(env.inst, COMMENTS, {"body": "once"}))
    assert error.status is None
    assert "RemoteProtocolError" in error.message
    assert statuses(env, "POST", COMMENTS) == [None]
    assert env.sleep.waits == []


@pytest.mark.anyio
@pytest.mark.parametrize("applied", [False, True])
async def test_an_idempotent_post_is_retried_after_a_drop(env: Env, applied: bool) -> None:
    comment = env.world.add_issue_comment(REPO, 1, user="alice", body="/review")
    path = f"/repos/{REPO}/issues/comments/{comment.id}/reactions"
    env.world.faults.drop(method="POST", path_glob=path, applied=applied)
    response = await env.client.request(env.inst, "POST", path, json={"content": "eyes"},
                                        idempotent=True)
    # If GitHub had applied the lost request, the retry finds the reaction there (200):
    # reactions de-duplicate, which is what makes retrying them safe.
    assert response.status_code == (200 if applied else 201)
    assert statuses(env, "POST", path) == [None, response.status_code]
    assert len(comment.reactions) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("fault", ["server_error", "drop", "slow"])
async def test_a_post_github_applied_but_did_not_answer_is_not_posted_twice(
        make_env: MakeEnv, guard: LeakGuard, fault: str) -> None:
    # GitHub created the comment, then the answer was lost: a 502, a dropped connection,
    # or an answer slower than the client's timeout. A retry would post it twice.
    env = await make_env(timeout=FAST_TIMEOUT)
    await env.client.installation_token(env.inst)
    faults = env.world.faults
    if fault == "server_error":
        faults.server_error(method="POST", path_glob=COMMENTS, applied=True)
    elif fault == "drop":
        faults.drop(method="POST", path_glob=COMMENTS, applied=True)
    else:
        faults.slow(method="POST", path_glob=COMMENTS, delay=5.0, applied=True)
    await guard.raises(ServerError, env.client.post_json(env.inst, COMMENTS, {"body": "once"}))
    assert [c.body for c in env.world.issue_comments.values()] == ["once"]
    assert len(env.world.requests.matching("POST", COMMENTS)) == 1


@pytest.mark.anyio
async def test_a_5xx_on_a_post_is_not_retried(env: Env, guard: LeakGuard) -> None:
    env.world.faults.server_error(method="POST", path_glob=COMMENTS, status=502)
    error = await guard.raises(ServerError,
                               env.client.post_json(env.inst, COMMENTS, {"body": "x"}))
    assert error.status == 502
    assert statuses(env, "POST", COMMENTS) == [502]


# -- token mint failures ---------------------------------------------------------------------
@pytest.mark.anyio
async def test_a_failing_token_mint_is_a_typed_error_without_credentials(
        env: Env, guard: LeakGuard) -> None:
    env.world.faults.fail_token_mint(status=500, times=None)
    error = await guard.raises(ServerError, env.client.get_json(env.inst, PR1))
    assert error.status == 500
    assert error.path == f"/app/installations/{env.inst}/access_tokens"
    assert len(env.mints()) == 4  # a mint is idempotent, so it is retried to the bound
    assert env.world.requests.matching("GET", PR1) == []
    assert env.jwts.issued  # there was a JWT to leak; the guard checks it did not


@pytest.mark.anyio
async def test_a_mint_blip_is_retried(env: Env) -> None:
    env.world.faults.fail_token_mint(status=502, times=1)
    assert (await env.client.get_json(env.inst, PR1))["number"] == 1
    assert [r.status for r in env.mints()] == [502, 201]


@pytest.mark.anyio
async def test_a_suspended_installation_cannot_mint(env: Env, guard: LeakGuard) -> None:
    env.harness.installation.suspended_at = START
    error = await guard.raises(Forbidden, env.client.get_json(env.inst, PR1))
    assert error.message == "This installation has been suspended"
    assert len(env.mints()) == 1


# -- slow responses -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_slow_get_beyond_the_timeout_is_retried_then_typed(
        make_env: MakeEnv, guard: LeakGuard) -> None:
    env = await make_env(timeout=FAST_TIMEOUT, policy=RetryPolicy(server_retries=1))
    env.world.faults.slow(path_glob=PR1, delay=5.0, times=1)
    assert (await env.client.get_json(env.inst, PR1))["number"] == 1
    env.world.faults.slow(path_glob=PR1, delay=5.0, times=None)
    error = await guard.raises(ServerError, env.client.get_json(env.inst, PR1))
    assert error.status is None
    assert "ReadTimeout" in error.message
    assert statuses(env, "GET", PR1) == [None, 200, None, None]


@pytest.mark.anyio
async def test_a_slow_post_beyond_the_timeout_is_not_retried(
        make_env: MakeEnv, guard: LeakGuard) -> None:
    env = await make_env(timeout=FAST_TIMEOUT)
    await env.client.installation_token(env.inst)
    env.world.faults.slow(method="POST", path_glob=COMMENTS, delay=5.0)
    error = await guard.raises(ServerError,
                               env.client.post_json(env.inst, COMMENTS, {"body": "x"}))
    assert "ReadTimeout" in error.message
    assert statuses(env, "POST", COMMENTS) == [None]
