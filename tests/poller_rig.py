"""A simulated GitHub wired to a real poller: the fixture the poller tests and bench share.

``PollerRig.create(tmp_path)`` builds the simulator's ``World`` (clock frozen at ``T0``,
one App, one installation on ``acme/widgets``), a real ``GitHubClient`` reaching it
through ``SimulatorTransport`` with the ``SqliteStore`` as its ETag cache, the queue, the
trigger context, and a ``Poller``. Time only moves when a test calls ``rig.tick()``.

This module holds no tests; it is named ``test_poller_*`` because the poller's tests own
that name.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest

from service.config.schema import ReviewConfig, TriggersConfig
from service.github.auth import AppJWT
from service.github.client import GitHubClient
from service.github.ratelimit import RateLimit
from service.intake.poller.loop import CycleReport, Poller
from service.intake.rules.decisions import TriggerContext
from service.storage.agent_comments import AgentComments
from service.storage.etags import StoredETags
from service.storage.queue import QueueRow
from service.storage.sqlite import SqliteStore
from service.storage.watermarks import Watermarks
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.simulator import SimClock, SimulatorTransport, World
from tests.simulator.harness import APP_ID, SAMPLE_DIFF, app_key_pair
from tests.simulator.models import Installation, IssueComment, PullRequest

API = "https://api.github.com"
REPO = "acme/widgets"
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SLUG = "pr-reviewer"


def sha(n: int) -> str:
    """A distinct 40-hex head sha per number."""
    return f"{n:040x}"


@dataclass
class SleepRecorder:
    """An injected sleep: records each wait and moves the simulated clock by it."""

    clock: SimClock
    waits: list[float] = field(default_factory=list)
    hook: Callable[[float], Awaitable[None]] | None = None

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.clock.advance(seconds)
        if self.hook is not None:
            await self.hook(seconds)


@dataclass
class PollerRig:
    world: World
    installation: Installation
    store: SqliteStore
    queue: QueueDriver
    ctx: TriggerContext
    sleep: SleepRecorder
    private_pem: str
    interval: timedelta
    allowlist: tuple[str, ...]
    refresh_every: int
    cycles: list[tuple[bool, datetime]] = field(default_factory=list)  # on_cycle calls
    client: GitHubClient = field(init=False)
    poller: Poller = field(init=False)

    @classmethod
    def create(
        cls, tmp_path: Path, *, repos: Sequence[str] = (REPO,),
        triggers: TriggersConfig | None = None, store: SqliteStore | None = None,
        allowlist: Sequence[str] = (), interval: timedelta = timedelta(seconds=300),
        refresh_every: int = 10, rate_limit: int = 5000,
    ) -> PollerRig:
        from tests.simulator import Settings

        private_pem, public_pem = app_key_pair()
        world = World(settings=Settings(rate_limit=rate_limit), clock=SimClock(frozen_at=T0))
        world.add_app(id=APP_ID, slug=SLUG, name="PR Reviewer", public_key_pem=public_pem,
                      owner="acme", webhook_secret=secrets.token_hex(16))
        for name in repos:
            world.add_repository(name)
        installation = world.add_installation(account="acme", repositories=list(repos))
        world.add_user("alice", association="MEMBER")
        world.add_user("bob", association="MEMBER")
        world.add_user("eve", association="NONE")
        store = store if store is not None else new_sqlite_store(tmp_path / "state.db")
        queue = QueueDriver(store)
        ctx = TriggerContext(config=triggers or TriggersConfig(), app_id=APP_ID,
                             app_slug=SLUG, agent_comments=AgentComments(store),
                             decline_phrases=ReviewConfig.decline_phrases)
        rig = cls(world=world, installation=installation, store=store, queue=queue, ctx=ctx,
                  sleep=SleepRecorder(world.clock), private_pem=private_pem,
                  interval=interval, allowlist=tuple(allowlist), refresh_every=refresh_every)
        rig.client = rig.new_client()
        rig.poller = rig.new_poller()
        return rig

    def new_client(self) -> GitHubClient:
        """A client of its own: its own installation tokens, so its own ETags."""
        world = self.world

        async def client_sleep(seconds: float) -> None:
            world.clock.advance(seconds)

        return GitHubClient(
            API, app_jwt=AppJWT(APP_ID, self.private_pem, world.clock.now),
            clock=world.clock.now, etags=StoredETags(self.store),
            transport=SimulatorTransport(world),
            sleep=client_sleep)

    def new_poller(self, **options: Any) -> Poller:
        return Poller(client=self.client, store=self.store, ctx=self.ctx,
                      clock=self.world.clock.now, interval=self.interval,
                      repositories=self.allowlist, sleep=self.sleep,
                      on_cycle=lambda ok, at: self.cycles.append((ok, at)),
                      refresh_every=self.refresh_every, **options)

    async def restart(self) -> None:
        """What a process restart leaves: the store, a new client, a new poller."""
        await self.client.aclose()
        self.client = self.new_client()
        self.poller = self.new_poller()

    async def close(self) -> None:
        await self.client.aclose()
        self.store.close()

    # -- time and polling ----------------------------------------------------------------

    def now(self) -> datetime:
        return self.world.clock.now()

    def tick(self, seconds: float = 1.0) -> datetime:
        return self.world.clock.advance(seconds)

    async def poll(self) -> CycleReport:
        return await self.poller.poll_once(self.now())

    def rows(self, *statuses: str) -> list[QueueRow]:
        return self.queue.rows(statuses or None)

    def keys(self) -> list[str]:
        return sorted(r.dedupe_key for r in self.queue.rows())

    def watermark(self, stream: str, repo: str = REPO) -> datetime | None:
        return Watermarks(self.store).get(f"{stream}:{repo}")

    def rate_limit(self) -> RateLimit | None:
        return self.client.rate_limit(self.installation.id)

    # -- what people do on GitHub -----------------------------------------------------------

    def open_pull(self, number: int, *, repo: str = REPO, user: str = "alice",
                  draft: bool = False, head: str | None = None, emit: bool = True,
                  **kw: Any) -> PullRequest:
        return self.world.add_pull(repo, number=number, title=f"Change {number}", user=user,
                                   head_sha=head or sha(number), base_sha="a" * 40,
                                   diff=SAMPLE_DIFF, draft=draft, emit=emit, **kw)

    def comment(self, number: int, body: str, *, repo: str = REPO, user: str = "bob",
                **kw: Any) -> IssueComment:
        return self.world.add_issue_comment(repo, number, user=user, body=body, emit=True,
                                            **kw)

    def push(self, number: int, head: str, *, repo: str = REPO) -> None:
        self.world.push(repo, number, head_sha=head, diff=SAMPLE_DIFF)

    def repo_requests(self) -> list[Any]:
        """Requests to ``/repos/...`` (the poller's listings), in order."""
        return self.world.requests.matching("GET", "/repos/*")


@pytest.fixture(name="rig")
async def poller_rig(tmp_path: Path) -> AsyncIterator[PollerRig]:
    """A ``PollerRig`` in ``tmp_path``, closed after the test (import it to use ``rig``)."""
    rig = PollerRig.create(tmp_path)
    try:
        yield rig
    finally:
        await rig.close()


#: A second repository of the installation.
GADGETS: Final = "acme/gadgets"


def requests_to(rig: PollerRig, repo: str) -> int:
    """How many GETs the simulator has seen for ``repo``."""
    return len(rig.world.requests.matching("GET", f"/repos/{repo}/*"))


def repositories_table(rig: PollerRig) -> dict[str, tuple[int, str | None]]:
    """The ``repositories`` table: installation and ``removed_at`` by name."""
    with rig.store.read() as conn:
        return {str(repo): (int(inst), removed) for repo, inst, removed in conn.execute(
            "SELECT repo, installation_id, removed_at FROM repositories")}


def legacy_marks(store: SqliteStore, at: str) -> None:
    """Watermarks as a store written before they named their repository holds them."""
    with store.transaction() as conn:
        conn.executemany("INSERT INTO watermarks (name, at) VALUES (?, ?)",
                         [("pull_requests", at), ("comments", at)])
