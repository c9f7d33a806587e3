"""The GitHub client against the simulator: the environment, a sleep on the simulator's
clock, and the guard that fails a test when a credential reaches a log line."""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest

from service.etags import ETagStore
from service.github import (
    AppJWT,
    GitHubClient,
    InstallationTokens,
)
from tests.simulator import World
from tests.simulator.harness import REPO, Harness

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
