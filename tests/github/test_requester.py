"""The transport under the client: 5xx and dropped connections retried within bounds (a
POST never repeated after a 5xx), writes to one installation spaced and one at a time."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest

from service.github.actors import APP
from service.github.errors import (
    ServerError,
)
from service.github.ratelimit import (
    RetryPolicy,
)
from tests.github.client_kit import (
    FakeClock,
    FakeSleep,
    Script,
    clock,
    err,
    make_client,
    ok,
    sleep,
)

__all__ = ["clock", "sleep"]  # fixtures


@pytest.mark.anyio
async def test_writes_to_one_installation_are_spaced_a_second_apart(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, lambda r: httpx.Response(201, json={"id": 1}))
    async with make_client(script, clock, sleep) as client:
        await client.post_json(1, "/repos/o/r/issues/1/comments", {"body": "a"})
        clock.now += timedelta(milliseconds=300)
        await client.post_json(1, "/repos/o/r/issues/1/comments", {"body": "b"})
        await client.post_json(2, "/repos/o/r/issues/1/comments", {"body": "c"})  # other inst.
        await client.get_json(1, "/repos/o/r")  # reads are not spaced
    assert script.sent_at[1] - script.sent_at[0] >= timedelta(seconds=1)
    assert sleep.waits == [pytest.approx(0.7)]
    assert script.sent_at[2] == script.sent_at[1]
    assert script.sent_at[3] == script.sent_at[2]


@pytest.mark.anyio
async def test_concurrent_writes_go_one_at_a_time(clock: FakeClock, sleep: FakeSleep) -> None:
    in_flight = 0
    peak = 0

    async def slow_create(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(5):
            await asyncio.sleep(0)
        in_flight -= 1
        return httpx.Response(201, json={"id": 1})

    script = Script(clock, slow_create)
    async with make_client(script, clock, sleep) as client:
        await asyncio.gather(
            *(client.patch_json(9, f"/repos/o/r/issues/comments/{i}", {"body": "x"})
              for i in range(4))
        )
    assert peak == 1
    gaps = [b - a for a, b in zip(script.sent_at, script.sent_at[1:], strict=False)]
    assert all(gap >= timedelta(seconds=1) for gap in gaps)
    assert sleep.waits == [1.0, 1.0, 1.0]


@pytest.mark.anyio
async def test_app_posts_are_not_queued_behind_writes(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, lambda r: httpx.Response(201, json={}))
    async with make_client(script, clock, sleep) as client:
        await client.post_json(APP, "/app/installations/1/access_tokens")
        await client.post_json(APP, "/app/installations/2/access_tokens")
    assert sleep.waits == []


@pytest.mark.anyio
async def test_5xx_retries_stop_at_their_bound(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, lambda r: err(502, "Server Error"))
    async with make_client(script, clock, sleep, rand=lambda: 0.0) as client:
        with pytest.raises(ServerError) as raised:
            await client.get_json(1, "/repos/o/r")
    assert len(script.requests) == 4  # 1 + RetryPolicy().server_retries
    assert sleep.waits == [0.5, 1.0, 2.0]  # base·2ⁿ, jitter at its floor of one half
    assert raised.value.status == 502


@pytest.mark.anyio
async def test_5xx_backoff_is_jittered_and_capped(clock: FakeClock, sleep: FakeSleep) -> None:
    draws = iter([1.0, 0.5, 0.0, 1.0, 1.0])
    policy = RetryPolicy(server_retries=5, backoff_base=2.0, backoff_cap=10.0)
    script = Script(clock, err(500), err(503), err(504), err(500), err(502), ok({"x": 1}))
    async with make_client(script, clock, sleep, policy=policy, rand=lambda: next(draws)) as c:
        assert await c.get_json(1, "/repos/o/r") == {"x": 1}
    assert sleep.waits == [2.0, 3.0, 4.0, 10.0, 10.0]


@pytest.mark.anyio
async def test_a_503_retry_after_is_a_floor_and_a_long_one_ends_retrying(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, err(503, **{"retry-after": "20"}), ok({"x": 1}),
                    err(503, **{"retry-after": "7200"}))
    async with make_client(script, clock, sleep) as client:
        assert await client.get_json(1, "/repos/o/r") == {"x": 1}
        with pytest.raises(ServerError):
            await client.get_json(1, "/repos/o/r")
    assert sleep.waits == [20]


@pytest.mark.anyio
async def test_a_post_is_not_repeated_after_a_5xx(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, err(502), err(502), ok({"id": 1}))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(ServerError):
            await client.post_json(1, "/repos/o/r/issues/1/comments", {"body": "hi"})
        assert len(script.requests) == 1
        assert await client.post_json(
            1, "/repos/o/r/issues/comments/5/reactions", {"content": "eyes"}, idempotent=True
        ) == {"id": 1}
    assert len(script.requests) == 3


@pytest.mark.anyio
async def test_connection_errors_retry_then_fail(clock: FakeClock, sleep: FakeSleep) -> None:
    def drop(request: httpx.Request) -> Exception:
        return httpx.ReadError("connection reset", request=request)

    script = Script(clock, drop, ok())
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(ServerError) as raised:
            await client.get_json(1, "/repos/o/r")
    assert len(script.requests) == 4
    assert len(sleep.waits) == 3
    assert raised.value.status is None
    assert "ReadError" in str(raised.value)


@pytest.mark.anyio
async def test_connect_errors_are_retried_even_for_a_post(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, httpx.ConnectError("refused"), ok({"id": 3}))
    async with make_client(script, clock, sleep) as client:
        assert await client.post_json(1, "/repos/o/r/issues/1/comments", {"body": "x"}) == {"id": 3}
    script = Script(clock, httpx.ReadTimeout("slow"), ok({"id": 4}))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(ServerError, match="ReadTimeout"):
            await client.post_json(1, "/repos/o/r/issues/1/comments", {"body": "x"})
    assert len(script.requests) == 1  # it may have been applied: never sent twice
