"""The GitHub client against the simulator: the environment, a sleep on the simulator's
clock, and the guard that fails a test when a credential reaches a log line."""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
import pytest

from service.github.auth import AppJWT, InstallationTokens
from service.github.client import GitHubClient
from service.github.ratelimit import RetryPolicy
from service.model.etags import ETagStore
from tests.simulator import Settings, SimClock, SimulatorTransport, World
from tests.simulator.harness import API, APP_ID, REPO, Harness

E = TypeVar("E", bound=BaseException)
START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
PULLS = f"/repos/{REPO}/pulls"
PR1 = f"/repos/{REPO}/pulls/1"


@dataclass
class LeakGuard:
    """Collects every secret of a test and every exception text it saw; checks the logs."""

    caplog: pytest.LogCaptureFixture
    secret_sources: list[Callable[[], list[str]]] = field(default_factory=list)
    exception_texts: list[str] = field(default_factory=list)

    async def raises(self, kind: type[E], awaitable: Awaitable[Any]) -> E:
        """Await, expect ``kind``, and keep its str, repr and formatted traceback."""
        try:
            await awaitable
        except kind as exc:
            return self.saw(exc)
        raise AssertionError(f"expected {kind.__name__}")

    def saw(self, exc: E) -> E:
        """Keep an exception's str, repr and formatted traceback for the final check."""
        self.exception_texts.append(str(exc))
        self.exception_texts.append(repr(exc))
        self.exception_texts.append("".join(traceback.format_exception(exc)))
        return exc

    def secrets(self) -> list[str]:
        found = [s for source in self.secret_sources for s in source()]
        return [s for s in found if s]

    def check(self) -> None:
        secrets = self.secrets()
        assert secrets, "the guard must know at least one secret to look for"
        records = self.caplog.records
        texts = [self.caplog.text, *self.exception_texts]
        texts += [record.getMessage() for record in records]
        texts += [repr(vars(record)) for record in records]
        haystack = "\n".join(texts)
        for secret in secrets:
            assert secret not in haystack, "a credential leaked into a log or an error"
            # A "masked" credential that keeps its tail is a leak too.
            if len(secret) > 48:
                assert secret[-32:] not in haystack, "part of a credential leaked"


def key_lines(private_pem: str) -> list[str]:
    """The base64 body lines of a PEM key: any one of them in a log is a leak."""
    return [line for line in private_pem.splitlines() if line and not line.startswith("-----")]


class SimSleep:
    """The client's sleep: records each wait and moves the simulated clock by it."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.world.clock.advance(seconds)
        await asyncio.sleep(0)


class RecordingJWT:
    """``AppJWT`` that remembers every JWT it handed out (so the guard can look for them)."""

    def __init__(self, inner: AppJWT) -> None:
        self.inner = inner
        self.issued: list[str] = []

    def __call__(self) -> str:
        token = self.inner()
        if token not in self.issued:
            self.issued.append(token)
        return token


@dataclass
class Env:
    harness: Harness
    client: GitHubClient
    sleep: SimSleep
    jwts: RecordingJWT
    etags: ETagStore

    @property
    def world(self) -> World:
        return self.harness.world

    @property
    def inst(self) -> int:
        return self.harness.installation.id

    @property
    def tokens(self) -> InstallationTokens:
        tokens = self.client.tokens
        assert isinstance(tokens, InstallationTokens)
        return tokens

    def mints(self) -> list[Any]:
        return self.world.requests.matching("POST", "/app/installations/*/access_tokens")

    def secrets(self) -> list[str]:
        app = self.harness.app
        return [*self.world.tokens, *self.jwts.issued, *key_lines(self.harness.private_key_pem),
                app.webhook_secret or "", app.client_secret or ""]


MakeEnv = Callable[..., Awaitable[Env]]


def remaining(env: Env) -> int:
    return env.world.limiter.bucket(f"installation:{env.inst}",
                                    env.world.clock.timestamp()).remaining


# -- the leak guard ----------------------------------------------------------------------------


@pytest.fixture
def guard(caplog: pytest.LogCaptureFixture) -> LeakGuard:
    caplog.set_level(logging.DEBUG)
    return LeakGuard(caplog)


# -- the environment ---------------------------------------------------------------------------


@pytest.fixture
async def make_env(guard: LeakGuard) -> AsyncIterator[MakeEnv]:
    made: list[Env] = []

    async def make(*, settings: Settings | None = None, skew: float = 0.0,
                   policy: RetryPolicy | None = None,
                   timeout: httpx.Timeout | None = None) -> Env:
        harness = Harness.create(settings=settings, clock=SimClock(frozen_at=START))
        await harness.client.aclose()  # the harness's raw client is not used here
        world = harness.world
        offset = timedelta(seconds=skew)

        def clock() -> datetime:
            return world.clock.now() + offset

        sleep = SimSleep(world)
        jwts = RecordingJWT(AppJWT(APP_ID, harness.private_key_pem, clock))
        etags = ETagStore()
        extra: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
        client = GitHubClient(API, app_jwt=jwts, clock=clock, etags=etags,
                              transport=SimulatorTransport(world), sleep=sleep,
                              rand=lambda: 1.0, policy=policy, **extra)
        env = Env(harness=harness, client=client, sleep=sleep, jwts=jwts, etags=etags)
        guard.secret_sources.append(env.secrets)
        made.append(env)
        return env

    yield make
    for env in made:
        await env.client.aclose()
    guard.check()


@pytest.fixture
async def env(make_env: MakeEnv) -> Env:
    return await make_env()
