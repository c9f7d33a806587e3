"""GitHub's rate limits: the state read from each answer, a secondary limit's Retry-After
waited, a primary limit waited until its reset or raised at once, a plain 403 not
mistaken for one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.github.errors import (
    Forbidden,
    RateLimited,
)
from service.github.ratelimit import (
    classify_rate_limit,
    parse_rate_limit,
    parse_retry_after,
    rate_limit_wait,
)
from tests.github.client_kit import (
    SECONDARY,
    T0,
    FakeClock,
    FakeSleep,
    Script,
    clock,
    err,
    limit_headers,
    make_client,
    ok,
    sleep,
)

__all__ = ["clock", "sleep"]  # fixtures


@pytest.mark.anyio
async def test_rate_limit_state_is_exposed_per_installation(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, ok(**limit_headers(4990, 600)), ok(**limit_headers(12, 300)))
    async with make_client(script, clock, sleep) as client:
        await client.get_json(1, "/repos/o/r")
        await client.get_json(2, "/repos/o/r")
        one, two = client.rate_limit(1), client.rate_limit(2)
        assert client.rate_limit(3) is None
    assert one is not None
    assert two is not None
    assert (one.remaining, one.reset, one.limit, one.used) == (4990, T0 + timedelta(seconds=600),
                                                               5000, 10)
    assert (two.remaining, two.reset) == (12, T0 + timedelta(seconds=300))


@pytest.mark.anyio
async def test_secondary_limit_waits_retry_after(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, err(403, SECONDARY, **{"retry-after": "37"}), ok({"done": True}))
    async with make_client(script, clock, sleep) as client:
        assert await client.get_json(1, "/repos/o/r") == {"done": True}
    assert sleep.waits == [37]
    assert script.sent_at[1] - script.sent_at[0] == timedelta(seconds=37)


@pytest.mark.anyio
async def test_primary_limit_waits_until_reset(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(
        clock,
        err(403, "API rate limit exceeded for installation ID 1.", **limit_headers(0, 120)),
        ok({"done": True}, **limit_headers(4999, 3600)),
    )
    async with make_client(script, clock, sleep) as client:
        assert await client.get_json(1, "/repos/o/r") == {"done": True}
    assert sleep.waits == [120]


@pytest.mark.anyio
async def test_secondary_without_headers_backs_off_from_60s_then_gives_up(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, lambda r: err(429, SECONDARY))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(RateLimited) as raised:
            await client.get_json(1, "/repos/o/r")
    assert sleep.waits == [60, 120, 240]
    assert len(script.requests) == 4
    assert raised.value.kind == "secondary"
    assert raised.value.until == T0 + timedelta(seconds=60 + 120 + 240 + 480)
    assert raised.value.status == 429
    assert SECONDARY in raised.value.message


@pytest.mark.anyio
async def test_a_distant_reset_raises_at_once_with_until(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, err(403, "API rate limit exceeded", **limit_headers(0, 3000)))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(RateLimited) as raised:
            await client.get_json(1, "/repos/o/r")
    assert sleep.waits == []
    assert raised.value.kind == "primary"
    assert raised.value.until == T0 + timedelta(seconds=3000)
    assert raised.value.resource == "core"


@pytest.mark.anyio
async def test_a_spent_budget_is_waited_out_before_sending(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, ok(**limit_headers(0, 30)), ok(**limit_headers(4999, 3600)))
    async with make_client(script, clock, sleep) as client:
        await client.get_json(1, "/repos/o/r")
        await client.get_json(1, "/repos/o/r/pulls")
    assert sleep.waits == [30]
    assert script.sent_at[1] == T0 + timedelta(seconds=30)


@pytest.mark.anyio
async def test_a_spent_budget_far_away_raises_without_sending(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, ok(**limit_headers(0, 3000)))
    async with make_client(script, clock, sleep) as client:
        await client.get_json(1, "/repos/o/r")
        with pytest.raises(RateLimited) as raised:
            await client.get_json(1, "/repos/o/r/pulls")
    assert len(script.requests) == 1
    assert raised.value.until == T0 + timedelta(seconds=3000)


@pytest.mark.anyio
async def test_a_plain_403_is_forbidden_not_a_wait(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(
        clock,
        err(403, "Resource not accessible by integration",
            **{"x-accepted-github-permissions": "pull_requests=write"}, **limit_headers(4000, 60)),
    )
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(Forbidden) as raised:
            await client.post_json(1, "/repos/o/r/pulls/1/reviews", {"event": "COMMENT"})
    assert sleep.waits == []
    assert raised.value.accepted_permissions == "pull_requests=write"
    assert "Resource not accessible by integration" in str(raised.value)


def test_rate_limit_pure_rules() -> None:
    now = T0
    assert classify_rate_limit(403, {"x-ratelimit-remaining": "0"}, "") == "primary"
    assert classify_rate_limit(403, {}, SECONDARY) == "secondary"
    assert classify_rate_limit(403, {"Retry-After": "5"}, "") == "secondary"
    assert classify_rate_limit(429, {}, "") == "secondary"
    assert classify_rate_limit(403, {"x-ratelimit-remaining": "10"}, "no") is None
    assert classify_rate_limit(500, {"x-ratelimit-remaining": "0"}, SECONDARY) is None
    assert rate_limit_wait({"retry-after": "7", **limit_headers(0, 900)}, now, 3) == 7
    assert rate_limit_wait(limit_headers(0, 900), now, 3) == 900
    assert rate_limit_wait(limit_headers(0, -5), now, 0) == 1  # reset already past
    assert rate_limit_wait(limit_headers(10, 900), now, 2) == 240
    assert parse_retry_after("Sun, 01 Mar 2026 12:01:30 GMT", now) == 90
    assert parse_retry_after("soon", now) is None
    assert parse_rate_limit({"x-ratelimit-limit": "x"}) is None
    parsed = parse_rate_limit({**limit_headers(5, 10), "x-ratelimit-resource": "search"})
    assert parsed is not None
    assert parsed.resource == "search"
