"""The GitHub client: headers and URLs, pagination, and no secret in a log record or an
exception (its conditional requests, rate limits, retries and errors have the files of
the modules that implement them)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service import __version__
from service.config.connections import GitHubConfig
from service.config.secret import Secret
from service.github.actors import APP
from service.github.client import GitHubClient
from service.github.errors import (
    GitHubError,
)
from service.github.urls import api_url, is_under_base, normalize_api_base, parse_link_header
from service.github.webhooks import SignatureError, check_signature, sign
from service.model.etags import ETagStore
from tests.github.client_kit import (
    BASE,
    SECONDARY,
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
