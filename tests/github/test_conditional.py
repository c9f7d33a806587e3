"""Cache keys for conditional requests name the token by a fingerprint that identifies it
without revealing it, so that a rotated token can never be served another's validators."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from service.github.conditional import (
    FINGERPRINT_HEX_DIGITS,
    Conditional,
    ConditionalStats,
    Validating,
    cache_key,
    resource_key,
    token_fingerprint,
)
from service.model.etags import ETagStore, resource_of
from tests.github.client_kit import (
    BASE,
    FakeClock,
    FakeSleep,
    FakeTokens,
    Script,
    clock,
    err,
    make_client,
    sleep,
)

__all__ = ["clock", "sleep"]  # fixtures

TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"  # the shape of one; not a real token


def test_the_fingerprint_identifies_a_token_without_revealing_it() -> None:
    fingerprint = token_fingerprint(TOKEN)
    assert len(fingerprint) == FINGERPRINT_HEX_DIGITS == 16
    assert fingerprint == hashlib.sha256(TOKEN.encode()).hexdigest()[:16]
    assert TOKEN not in fingerprint and fingerprint not in TOKEN
    assert token_fingerprint(TOKEN + "x") != fingerprint


def test_a_key_is_the_resource_then_the_token_and_two_tokens_share_the_resource() -> None:
    resource = resource_key(31, "application/vnd.github+json",
                            "/repos/acme/widgets/pulls?state=all")
    assert resource == "gh:v1:i31:application/vnd.github+json /repos/acme/widgets/pulls?state=all"
    old = cache_key(resource, token_fingerprint("ghs_old"))
    new = cache_key(resource, token_fingerprint("ghs_new"))
    assert old != new
    # The cache's own rule reads the same split: both variants are one resource.
    assert resource_of(old) == resource_of(new) == resource
    other = resource_key(32, "application/vnd.github+json",
                         "/repos/acme/widgets/pulls?state=all")
    assert resource_of(cache_key(other, token_fingerprint("ghs_old"))) != resource


def test_a_snapshot_does_not_move_with_the_counters() -> None:
    stats = ConditionalStats(sent_validators=3, not_modified=2, first_requests=1)
    snapshot = stats.snapshot()
    stats.after_rotation += 5
    stats.sent_validators += 1
    assert snapshot == ConditionalStats(sent_validators=3, not_modified=2, first_requests=1,
                                        after_rotation=0)


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


def test_validators_are_sent_for_the_same_token_and_a_rotation_is_counted_apart() -> None:
    validating = Validating(ETagStore())
    url = f"{BASE}/repos/o/r/pulls"
    request = httpx.Request("GET", url)

    def attempt(token: str, answer: httpx.Response) -> dict[str, str]:
        cond, headers = Conditional(), {}
        validating.add(cond, 7, accept="application/json", url=url, token=token,
                       headers=headers)
        validating.settle(cond, answer, "/repos/o/r/pulls")
        return headers

    assert attempt("tok-1", httpx.Response(200, headers={"etag": '"a"'},
                                           request=request)) == {}
    assert attempt("tok-1", httpx.Response(304, request=request)) == {
        "If-None-Match": '"a"'}
    assert attempt("tok-2", httpx.Response(200, headers={"etag": '"b"'},
                                           request=request)) == {}  # another token's
    assert validating.stats.snapshot() == ConditionalStats(
        sent_validators=1, not_modified=1, first_requests=1, after_rotation=1)

