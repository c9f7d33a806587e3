"""What the GitHub client's tests share: a fake clock and sleep (virtual time), fake
installation tokens, a scripted transport, and a client built on them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from service.github.client import GitHubClient
from service.github.ratelimit import (
    RetryPolicy,
)
from service.model.etags import ETagStore

__all__ = ["BASE", "EPOCH0", "SECONDARY", "T0", "FakeClock", "FakeSleep", "FakeTokens",
           "Script", "clock", "err", "limit_headers", "make_client", "ok", "sleep"]

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
