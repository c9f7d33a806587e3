"""The GitHub client: headers, pagination, conditional requests, limits, retries, errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service import __version__
from service.config.schema import GitHubConfig
from service.config.secret import Secret
from service.github.actors import APP
from service.github.client import GitHubClient
from service.github.conditional import token_fingerprint
from service.github.errors import (
    Forbidden,
    GitHubError,
    NotAcceptable,
    NotFound,
    RateLimited,
    ServerError,
    Unauthorized,
    Unprocessable,
)
from service.github.ratelimit import (
    RetryPolicy,
    classify_rate_limit,
    parse_rate_limit,
    parse_retry_after,
    rate_limit_wait,
)
from service.github.urls import api_url, is_under_base, normalize_api_base, parse_link_header
from service.github.webhooks import SignatureError, check_signature, sign
from service.model.etags import ETagStore

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
EPOCH0 = int(T0.timestamp())
BASE = "https://api.github.com"
SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes."



class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class FakeSleep:
    """Records every wait and moves the fake clock by it."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.now += timedelta(seconds=seconds)
        await asyncio.sleep(0)


class FakeTokens:
    """A TokenSource whose current token the test sets (rotation on demand)."""

    def __init__(self, token: str = "tok-A") -> None:
        self.current = token
        self.invalidated: list[tuple[int, str]] = []

    async def token(self, installation_id: int) -> str:
        return f"{self.current}-{installation_id}"

    def invalidate(self, installation_id: int, token: str) -> None:
        self.invalidated.append((installation_id, token))


Reply = httpx.Response | Exception
Responder = Callable[[httpx.Request], Reply | Awaitable[Reply]]


class Script:
    """A MockTransport handler: a queue of replies (or a function), and every request seen."""

    def __init__(self, clock: FakeClock, *replies: Reply | Responder) -> None:
        self.clock = clock
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.sent_at: list[datetime] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.sent_at.append(self.clock())
        if not self.replies:
            raise AssertionError(f"unexpected request {request.method} {request.url}")
        head = self.replies[0] if callable(self.replies[0]) else self.replies.pop(0)
        reply: Reply | Awaitable[Reply] = head(request) if callable(head) else head
        if isinstance(reply, Awaitable):
            reply = await reply
        if isinstance(reply, Exception):
            raise reply
        return reply


def make_client(
    script: Script,
    clock: FakeClock,
    sleep: FakeSleep,
    *,
    tokens: FakeTokens | None = None,
    etags: ETagStore | None = None,
    policy: RetryPolicy | None = None,
    rand: Callable[[], float] = lambda: 0.0,
    base: str = BASE,
) -> GitHubClient:
    return GitHubClient(
        base,
        app_jwt=lambda: "app-jwt-value",
        clock=clock,
        tokens=tokens or FakeTokens(),
        etags=etags,
        transport=httpx.MockTransport(script),
        sleep=sleep,
        rand=rand,
        policy=policy,
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sleep(clock: FakeClock) -> FakeSleep:
    return FakeSleep(clock)


def ok(json: Any = None, **headers: str) -> httpx.Response:
    return httpx.Response(200, json=json if json is not None else {}, headers=headers)


def err(status: int, message: str = "", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"message": message}, headers=headers)


def limit_headers(remaining: int, reset_in: int, *, limit: int = 5000) -> dict[str, str]:
    return {
        "x-ratelimit-limit": str(limit),
        "x-ratelimit-remaining": str(remaining),
        "x-ratelimit-used": str(limit - remaining),
        "x-ratelimit-reset": str(EPOCH0 + reset_in),
        "x-ratelimit-resource": "core",
    }


# ---------------------------------------------------------------- headers and URLs


@pytest.mark.anyio
async def test_headers_on_every_request(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, ok({"a": 1}), ok({"b": 2}))
    async with make_client(script, clock, sleep) as client:
        assert await client.get_json(12, "/repos/o/r", {"state": "open"}) == {"a": 1}
        assert await client.get_json(APP, "/app") == {"b": 2}
    first, second = script.requests
    for request in (first, second):
        assert request.headers["accept"] == "application/vnd.github+json"
        assert request.headers["x-github-api-version"] == "2022-11-28"
        assert request.headers["user-agent"] == f"pr-review-agent/{__version__}"
    assert first.headers["authorization"] == "Bearer tok-A-12"
    assert str(first.url) == "https://api.github.com/repos/o/r?state=open"
    assert second.headers["authorization"] == "Bearer app-jwt-value"


@pytest.mark.anyio
async def test_get_text_asks_for_the_diff_media_type(clock: FakeClock, sleep: FakeSleep) -> None:
    diff = "diff --git a/x b/x\n+hello\n"
    script = Script(clock, httpx.Response(200, text=diff))
    async with make_client(script, clock, sleep) as client:
        assert await client.get_text(1, "/repos/o/r/pulls/3") == diff
    assert script.requests[0].headers["accept"] == "application/vnd.github.diff"


@pytest.mark.anyio
async def test_ghes_paths_join_under_api_v3(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, ok([]))
    async with make_client(script, clock, sleep, base="https://ghe.example.com/api/v3/") as c:
        await c.get_json(1, "/repos/o/r/pulls", {"per_page": 5})
    assert str(script.requests[0].url) == "https://ghe.example.com/api/v3/repos/o/r/pulls?per_page=5"


def test_url_helpers() -> None:
    assert normalize_api_base("https://ghe.example.com/api/v3/") == "https://ghe.example.com/api/v3"
    assert api_url("https://api.github.com/", "/repos/o/r") == "https://api.github.com/repos/o/r"
    assert api_url("https://h/api/v3", "/app") == "https://h/api/v3/app"
    assert api_url("https://h/api/v3", "https://h/api/v3/x?page=2") == "https://h/api/v3/x?page=2"
    assert is_under_base("https://h/api/v3", "https://H/api/v3/repos")
    assert not is_under_base("https://h/api/v3", "https://h/api/v30/repos")
    assert not is_under_base("https://h/api/v3", "https://evil.example/api/v3/repos")
    assert not is_under_base("https://h", "http://h/repos")
    for bad_base in ("ftp://h", "api.github.com", "https://h/api?x=1"):
        with pytest.raises(ValueError):
            normalize_api_base(bad_base)
    for bad_path in ("repos/o/r", "https://evil.example/repos"):
        with pytest.raises(ValueError):
            api_url("https://api.github.com", bad_path)


def test_link_header_parsing() -> None:
    value = (
        '<https://api.github.com/x?page=2&a=b,c>; rel="next", '
        '<https://api.github.com/x?page=5>; rel="last", '
        "<https://api.github.com/x?page=1>; rel=first, "
        '<https://api.github.com/x?page=1>; title="no rel", '
        '<https://api.github.com/y>; rel="prev start"'
    )
    assert parse_link_header(value) == {
        "next": "https://api.github.com/x?page=2&a=b,c",
        "last": "https://api.github.com/x?page=5",
        "first": "https://api.github.com/x?page=1",
        "prev": "https://api.github.com/y",
        "start": "https://api.github.com/y",
    }
    assert parse_link_header(None) == {}
    assert parse_link_header("garbage; rel=next") == {}


# ---------------------------------------------------------------- pagination


def _page(n: int, last: int, items: list[Any]) -> httpx.Response:
    headers = {}
    if n < last:
        headers["link"] = (
            f'<{BASE}/repos/o/r/pulls?state=all&per_page=100&page={n + 1}>; rel="next", '
            f'<{BASE}/repos/o/r/pulls?state=all&per_page=100&page={last}>; rel="last"'
        )
    return httpx.Response(200, json=items, headers=headers)


@pytest.mark.anyio
async def test_paginate_follows_next_links(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, _page(1, 3, [1, 2]), _page(2, 3, [3]), _page(3, 3, [4, 5]))
    async with make_client(script, clock, sleep) as client:
        items = [i async for i in client.paginate(8, "/repos/o/r/pulls", {"state": "all"})]
    assert items == [1, 2, 3, 4, 5]
    urls = [str(r.url) for r in script.requests]
    assert urls[0] == f"{BASE}/repos/o/r/pulls?per_page=100&state=all"
    assert urls[1] == f"{BASE}/repos/o/r/pulls?state=all&per_page=100&page=2"
    assert all(r.headers["authorization"] == "Bearer tok-A-8" for r in script.requests)


@pytest.mark.anyio
async def test_paginate_stops_at_max_pages_and_on_a_loop(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, _page(1, 3, [1]), _page(2, 3, [2]))
    async with make_client(script, clock, sleep) as client:
        assert [i async for i in client.paginate(1, "/repos/o/r/pulls", max_pages=2)] == [1, 2]
    looping = httpx.Response(
        200, json=[9], headers={"link": f'<{BASE}/repos/o/r/pulls?per_page=100>; rel="next"'}
    )
    script = Script(clock, looping)
    async with make_client(script, clock, sleep) as client:
        assert [i async for i in client.paginate(1, "/repos/o/r/pulls")] == [9]
    assert len(script.requests) == 1


@pytest.mark.anyio
async def test_paginate_refuses_links_to_another_host(clock: FakeClock, sleep: FakeSleep) -> None:
    evil = httpx.Response(200, json=[1], headers={"link": '<https://evil.example/x>; rel="next"'})
    script = Script(clock, evil)
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(ValueError, match="outside"):
            _ = [i async for i in client.paginate(1, "/repos/o/r/pulls")]
    assert len(script.requests) == 1  # the token never went to evil.example


@pytest.mark.anyio
async def test_paginate_items_key_and_shape_check(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, ok({"total_count": 1, "repositories": [{"id": 1}]}), ok({"x": 1}))
    async with make_client(script, clock, sleep) as client:
        got = [r async for r in client.paginate(1, "/installation/repositories",
                                                items_key="repositories")]
        assert got == [{"id": 1}]
        with pytest.raises(GitHubError, match="not a list"):
            _ = [r async for r in client.paginate(1, "/repos/o/r/pulls")]


# ---------------------------------------------------------------- conditional requests


@pytest.mark.anyio
async def test_304_means_not_modified(clock: FakeClock, sleep: FakeSleep) -> None:
    etags = ETagStore()
    lm = "Sun, 01 Mar 2026 11:00:00 GMT"
    script = Script(
        clock,
        httpx.Response(
            200, json=[{"id": 1}], headers={"etag": 'W/"abc"', "last-modified": lm,
                                            "link": f'<{BASE}/x?page=2>; rel="next"'}
        ),
        httpx.Response(304, headers={"etag": 'W/"abc"'}),
    )
    async with make_client(script, clock, sleep, etags=etags) as client:
        first = await client.get_conditional(4, "/repos/o/r/pulls", {"sort": "updated"})
        second = await client.get_conditional(4, "/repos/o/r/pulls", {"sort": "updated"})
        stats = client.conditional_stats
    assert not first.not_modified
    assert first.data == [{"id": 1}]
    assert first.links["next"] == f"{BASE}/x?page=2"
    assert second.not_modified
    assert second.status == 304
    assert second.data is None
    assert "if-none-match" not in script.requests[0].headers
    assert script.requests[1].headers["if-none-match"] == 'W/"abc"'
    assert script.requests[1].headers["if-modified-since"] == lm
    assert (stats.first_requests, stats.sent_validators, stats.not_modified) == (1, 1, 1)
    assert stats.after_rotation == 0
    # The cache key names the token by fingerprint, never by value.
    (key,) = etags._entries
    assert "tok-A-4" not in key
    assert token_fingerprint("tok-A-4") in key


@pytest.mark.anyio
async def test_rotation_never_sends_the_old_tokens_validators(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    etags = ETagStore()
    tokens = FakeTokens("tok-A")

    def answer(request: httpx.Request) -> httpx.Response:
        if request.headers.get("if-none-match") is not None:
            return httpx.Response(304)
        tag = request.headers["authorization"][-7:]
        return httpx.Response(200, json=[], headers={"etag": f'"{tag}"'})

    script = Script(clock, answer)
    async with make_client(script, clock, sleep, etags=etags, tokens=tokens) as client:
        await client.get_conditional(4, "/repos/o/r/issues/comments")  # first: 200
        assert (await client.get_conditional(4, "/repos/o/r/issues/comments")).not_modified
        tokens.current = "tok-B"  # the hourly rotation
        after = await client.get_conditional(4, "/repos/o/r/issues/comments")
        again = await client.get_conditional(4, "/repos/o/r/issues/comments")
        stats = client.conditional_stats
    assert not after.not_modified  # one full 200 ...
    assert "if-none-match" not in script.requests[2].headers  # ... with no stale validator
    assert again.not_modified
    assert script.requests[3].headers["if-none-match"] == '"tok-B-4"'
    assert stats.after_rotation == 1
    assert stats.first_requests == 1
    assert stats.sent_validators == 2
    assert stats.not_modified == 2


@pytest.mark.anyio
async def test_conditional_counts_once_per_request_even_with_retries(
    clock: FakeClock, sleep: FakeSleep
) -> None:
    script = Script(clock, err(502), httpx.Response(200, json=[], headers={"etag": '"x"'}))
    async with make_client(script, clock, sleep, etags=ETagStore()) as client:
        await client.get_conditional(1, "/repos/o/r/pulls")
        assert client.conditional_stats.first_requests == 1


@pytest.mark.anyio
async def test_get_conditional_needs_a_cache(clock: FakeClock, sleep: FakeSleep) -> None:
    async with make_client(Script(clock), clock, sleep) as client:
        with pytest.raises(RuntimeError):
            await client.get_conditional(1, "/repos/o/r/pulls")


# ---------------------------------------------------------------- rate limits


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


# ---------------------------------------------------------------- server errors, connections


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


# ---------------------------------------------------------------- write serialisation


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


# ---------------------------------------------------------------- typed errors


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "error_type"),
    [(401, Unauthorized), (403, Forbidden), (404, NotFound), (410, NotFound),
     (406, NotAcceptable), (422, Unprocessable), (409, GitHubError)],
)
async def test_statuses_map_to_typed_errors(
    clock: FakeClock, sleep: FakeSleep, status: int, error_type: type[GitHubError]
) -> None:
    script = Script(clock, err(status, "nope", **{"x-github-request-id": "ABCD:1234"}))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(error_type) as raised:
            await client.get_json(APP, "/repos/o/r/pulls/1")
    assert raised.value.status == status
    assert raised.value.message == "nope"
    assert raised.value.path == "/repos/o/r/pulls/1"
    assert raised.value.request_id == "ABCD:1234"


@pytest.mark.anyio
async def test_422_carries_githubs_message_and_errors(clock: FakeClock, sleep: FakeSleep) -> None:
    body = {
        "message": "Unprocessable Entity",
        "errors": ["Pull request review thread line must be part of the diff"],
        "documentation_url": "https://docs.github.com/rest/pulls/reviews",
    }
    script = Script(clock, httpx.Response(422, json=body))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(Unprocessable) as raised:
            await client.post_json(1, "/repos/o/r/pulls/1/reviews", {"event": "COMMENT"})
    assert raised.value.message == "Unprocessable Entity"
    assert raised.value.errors == ("Pull request review thread line must be part of the diff",)
    assert raised.value.documentation_url == body["documentation_url"]
    assert "422 POST /repos/o/r/pulls/1/reviews: Unprocessable Entity" == str(raised.value)


@pytest.mark.anyio
async def test_406_too_large_diff(clock: FakeClock, sleep: FakeSleep) -> None:
    body = {
        "message": "Sorry, the diff exceeded the maximum number of files (300).",
        "errors": [{"resource": "PullRequest", "field": "diff", "code": "too_large"}],
    }
    script = Script(clock, httpx.Response(406, json=body))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(NotAcceptable) as raised:
            await client.get_text(1, "/repos/o/r/pulls/1")
    assert raised.value.too_large


@pytest.mark.anyio
async def test_non_json_error_bodies_and_success_bodies(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, httpx.Response(404, text="<html>"), httpx.Response(200, text="nope"),
                    httpx.Response(204))
    async with make_client(script, clock, sleep) as client:
        with pytest.raises(NotFound, match="Not Found"):
            await client.get_json(1, "/x")
        with pytest.raises(GitHubError, match="not JSON"):
            await client.get_json(1, "/x")
        await client.delete(1, "/repos/o/r/issues/comments/1")
    assert [r.method for r in script.requests] == ["GET", "GET", "DELETE"]


@pytest.mark.anyio
async def test_bad_actor_is_a_value_error(clock: FakeClock, sleep: FakeSleep) -> None:
    async with make_client(Script(clock), clock, sleep) as client:
        for actor in (0, -1, True, "installation"):
            with pytest.raises(ValueError):
                await client.get_json(actor, "/x")  # type: ignore[arg-type]


# ---------------------------------------------------------------- secrets stay secret


@pytest.fixture(scope="module")
def pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _all_text(record: logging.LogRecord) -> Iterator[str]:
    yield record.getMessage()
    for value in vars(record).values():
        yield str(value)
        yield repr(value)


def _exception_text(exc: BaseException) -> Iterator[str]:
    seen: BaseException | None = exc
    while seen is not None:
        yield str(seen)
        yield repr(seen)
        yield repr(vars(seen))
        seen = seen.__cause__ or seen.__context__


@pytest.mark.anyio
async def test_no_secret_ever_reaches_a_log_record_or_an_exception(
    pem: str, clock: FakeClock, sleep: FakeSleep, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = "ghs_" + "S3CR3T" * 80
    webhook_secret = "whsec-do-not-print-me"
    jwts: list[str] = []
    failures: Iterator[httpx.Response | Exception] = iter([
        err(401, "Bad credentials"),
        err(403, SECONDARY, **{"retry-after": "5"}),
        err(500, "boom"),
        httpx.ConnectError("refused"),
        err(422, "Validation Failed"),
        err(404, "Not Found"),
        err(403, "Resource not accessible by integration"),
        err(403, "API rate limit exceeded", **limit_headers(0, 5000)),
    ])

    def github(request: httpx.Request) -> httpx.Response:
        auth = request.headers["authorization"].removeprefix("Bearer ")
        if request.url.path.endswith("/access_tokens"):
            jwts.append(auth)
            expires = (clock() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            return httpx.Response(201, json={"token": token, "expires_at": expires})
        reply = next(failures, None)
        if reply is None:
            return ok({"fine": True})
        if isinstance(reply, Exception):
            raise reply
        return reply

    config = GitHubConfig(app_id=7, private_key=Secret(pem),
                          webhook_secrets=(Secret(webhook_secret),))
    client = GitHubClient.from_config(
        config, clock=clock, transport=httpx.MockTransport(github), sleep=sleep,
        etags=ETagStore(),
    )
    raised: list[BaseException] = []
    async with client:
        for _ in range(8):
            try:
                await client.get_conditional(3, "/repos/o/r/pulls")
            except GitHubError as exc:
                raised.append(exc)
        raised_token = await client.installation_token(3)
        texts = [repr(client), repr(client.tokens), repr(client.tokens.cached(3))]  # type: ignore[attr-defined]
    for bad_body in (b"x", b"y"):
        try:
            check_signature(bad_body, sign(b"other", webhook_secret), [webhook_secret])
        except SignatureError as exc:
            raised.append(exc)

    assert raised_token == token
    assert jwts
    assert {type(e).__name__ for e in raised} >= {"Unprocessable", "NotFound", "Forbidden",
                                                  "RateLimited", "SignatureError"}
    assert caplog.records  # the client does log: there is something to search
    pem_lines = [line for line in pem.splitlines() if "-----" not in line]
    needles = [token, webhook_secret, *jwts, *pem_lines, "S3CR3T"]
    haystack = texts + [t for r in caplog.records for t in _all_text(r)]
    haystack += [t for e in raised for t in _exception_text(e)]
    for needle in needles:
        for text in haystack:
            assert needle not in text
