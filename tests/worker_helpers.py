"""Shared set-up for the worker tests: a simulated GitHub with a real git repository, a
real store, queue and governor, a fake engine, and a recording publisher."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.config.connections import GitHubConfig
from service.config.posting import PublishConfig
from service.config.schema import BudgetConfig, Config, EngineConfig, TriggersConfig
from service.config.secret import Secret
from service.engine.base import (
    Assessment,
    Description,
    EngineRequest,
    EngineResult,
    Finding,
    Sizing,
    estimate_tokens,
)
from service.engine.windows import Window
from service.github.auth import AppJWT
from service.github.client import GitHubClient
from service.model.etags import ETagStore
from service.model.jobs import Job
from service.publish.acknowledge import GitHubAck
from service.publish.github import GitHubPublisher
from service.review.checkout import Checkouts, GitRunner
from service.review.installations import Installations
from service.review.job import JobRunner, Tuning
from service.review.routing import Route
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from tests.kit.publishers import RecordingPublisher
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.simulator import GitRepo, SimulatorTransport, World, open_pull
from tests.simulator.harness import app_key_pair
from tests.simulator.models import PullRequest

API = "https://api.github.com"
APP_ID = 4242
REPO = "acme/widgets"
OWNER = "host:1:0"
BASE_FILES = {
    "README.md": "# Widgets\n",
    "REVIEW.md": "Base rules: check error handling.\n",
    "src/app.py": "".join(f"line {i}\n" for i in range(1, 21)),
}


def job_config() -> Config:
    """The operator's config a worker test reviews under (engine limits made small)."""
    github = GitHubConfig(app_id=APP_ID, private_key=Secret("unused"),
                          webhook_secrets=(Secret("unused"),))
    return Config(github=github, triggers=TriggersConfig(), budget=budget(),
                  engine=EngineConfig(max_turns=5, wall_clock_seconds=30))


def budget(*, max_run_tokens: int = 10_000, session: int = 1_000_000,
           weekly: int = 10_000_000, enabled: bool = True) -> BudgetConfig:
    return BudgetConfig(enabled=enabled, session_tokens=session, weekly_tokens=weekly,
                        max_run_tokens=max_run_tokens, reviewer_share_pct=100)


class FakeEngine:
    """An Engine: records each request, runs an optional hook, answers with ``answer``."""

    name = "fake"

    def __init__(self, tokens: int = 1234, model: str = "fake-1") -> None:
        self.tokens, self.model = tokens, model
        #: How the fake sizes a run (``Engine.sizing``): no window unless a test sets one.
        self.window: int | None = None
        self.answer_tokens = 200
        self.requests: list[EngineRequest] = []
        self.hook: Callable[[EngineRequest], Awaitable[None]] | None = None
        self.answer: Callable[[EngineRequest], EngineResult] = self.completed
        self.environments: list[dict[str, str]] = []

    async def run(self, request: EngineRequest) -> EngineResult:
        self.requests.append(request)
        self.environments.append(dict(os.environ))
        if self.hook is not None:
            await self.hook(request)
        return self.answer(request)

    async def sizing(self, reservation: int) -> Sizing:
        return Sizing(window=Window(self.window, "the test's"),
                      answer_tokens=self.answer_tokens, bytes_per_token=4.0)

    async def price(self, request: EngineRequest) -> int:
        """Its prompt, as Claude Code counts one: 4 characters a token, plus a little."""
        return estimate_tokens(request.diff, *request.changed_paths) + 50

    def usage(self) -> Usage:
        return Usage(tokens=self.tokens, confidence="exact", engine=self.name, model=self.model)

    def completed(self, request: EngineRequest) -> EngineResult:
        if request.command == "ask":
            return EngineResult(usage=self.usage(), stop_reason="completed",
                                answer="Because `line 1` is read before it is checked.")
        if request.command == "describe":
            return EngineResult(usage=self.usage(), stop_reason="completed",
                                description=Description("A title", "What it does.",
                                                        ("one change",)))
        path = request.changed_paths[0]
        finding = Finding(path=path, line=1, side="RIGHT", start_line=None, severity="minor",
                          category="correctness", title="Check this", body="Looks off.")
        return EngineResult(usage=self.usage(), stop_reason="completed", findings=(finding,),
                            assessment=Assessment("Mostly fine.", "low"))


@dataclass
class Sim:
    """Everything one worker test touches."""

    tmp: Path
    world: World
    git: GitRepo
    github: GitHubClient
    store: SqliteStore
    queue: QueueDriver
    governor: Governor
    engine: Any  # a FakeEngine, or a real engine for end-to-end tests
    publisher: RecordingPublisher
    checkouts: Checkouts
    base_sha: str
    installation_id: int
    alice_id: int
    config: Config = field(default_factory=job_config)
    tuning: Tuning = field(default_factory=Tuning)
    _branches: int = 0

    def now(self) -> datetime:
        return self.world.clock.now()

    def open_pr(self, files: dict[str, str | None], *, title: str = "A change",
                body: str = "Please review.", draft: bool = False) -> PullRequest:
        self._branches += 1
        branch = f"feature-{self._branches}"
        self.git.commit(files, parent=self.base_sha, branch=branch, message=title)
        return open_pull(self.world, REPO, self.git, base_ref="main", head_ref=branch,
                         title=title, user="alice", body=body, draft=draft, emit=False)

    def enqueue_opened(self, pr: PullRequest, head: str | None = None) -> str:
        job = Job(kind="pr_opened", repo=REPO, pr_number=pr.number, actor_id=self.alice_id,
                  head_sha=head or pr.head.head_sha)
        assert self.queue.enqueue(job, now=self.now())
        return job.dedupe_key

    def enqueue_mention(self, pr: PullRequest, *, command: str = "review",
                        body: str | None = None) -> tuple[str, int]:
        comment = self.world.add_issue_comment(REPO, pr.number, user="bob",
                                               body=body or f"@claude {command}")
        job = Job(kind="mention", repo=REPO, pr_number=pr.number,
                  actor_id=self.world.user("bob").id, comment_id=comment.id,
                  comment_source="issue", command=command)  # type: ignore[arg-type]
        assert self.queue.enqueue(job, now=self.now())
        return job.dedupe_key, comment.id

    def claim(self, owner: str = OWNER) -> Claim:
        claim = self.queue.claim(now=self.now(), owner=owner, admit=self.governor.admit)
        assert claim is not None, "nothing was claimable"
        return claim

    def configured(self, **sections: dict[str, Any]) -> Config:
        """``config`` with each named section's keys changed."""
        return replace(self.config, **{name: replace(getattr(self.config, name), **keys)
                                       for name, keys in sections.items()})

    def runner(self, config: Config | None = None, tuning: Tuning | None = None, *,
               publisher: Any = None, routes: Sequence[Route] = ()) -> JobRunner:
        return JobRunner(
            store=self.store, leasing=self.queue.leasing, governor=self.governor,
            github=self.github,
            installations=Installations(self.store, self.github), checkouts=self.checkouts,
            engine=self.engine, publisher=publisher or self.publisher,
            clock=self.world.clock.now, config=config or self.config, tuning=tuning or self.tuning,
            routes=routes)

    # -- inspection ---------------------------------------------------------------------

    def ledger(self, key: str) -> list[dict[str, Any]]:
        with self.store.read() as conn:
            conn.row_factory = _dict_row
            try:
                return list(conn.execute(
                    "SELECT * FROM ledger WHERE dedupe_key = ? ORDER BY id", (key,)))
            finally:
                conn.row_factory = None

    def run_row(self, key: str) -> dict[str, Any] | None:
        with self.store.read() as conn:
            conn.row_factory = _dict_row
            try:
                row: dict[str, Any] | None = conn.execute(
                    "SELECT * FROM runs WHERE dedupe_key = ?", (key,)).fetchone()
                return row
            finally:
                conn.row_factory = None

    def status(self, key: str) -> str:
        row = self.queue.get(key)
        assert row is not None
        return row.status


def _dict_row(cursor: Any, row: tuple[Any, ...]) -> dict[str, Any]:
    return {d[0]: v for d, v in zip(cursor.description, row, strict=True)}


def build_sim(tmp: Path, *, config: BudgetConfig | None = None,
              git: GitRunner | None = None, lease: timedelta = timedelta(seconds=1200),
              ack_on_github: bool = True) -> Sim:
    private_pem, public_pem = app_key_pair()
    world = World()
    world.add_app(id=APP_ID, slug="pr-reviewer", public_key_pem=public_pem, owner="acme")
    remote = GitRepo.create(tmp / "remote" / "widgets.git")
    world.add_repository(REPO, git_dir=remote.path)
    installation = world.add_installation(account="acme", repositories=[REPO])
    alice = world.add_user("alice", association="MEMBER")
    world.add_user("bob", association="MEMBER")
    base_sha = remote.commit(BASE_FILES, branch="main", message="base")

    async def virtual_sleep(seconds: float) -> None:
        # The client's write spacing and back-off waits pass on the simulated clock.
        world.clock.advance(seconds)

    github = GitHubClient(API, app_jwt=AppJWT(APP_ID, Secret(private_pem), world.clock.now),
                          clock=world.clock.now, transport=SimulatorTransport(world),
                          sleep=virtual_sleep, etags=ETagStore())
    store = new_sqlite_store(tmp / "state.db")
    queue = QueueDriver(store, lease=lease)
    governor = Governor(store, config or budget())
    acker = GitHubAck(github, Installations(store, github)) if ack_on_github else None
    return Sim(tmp=tmp, world=world, git=remote, github=github, store=store, queue=queue,
               governor=governor, engine=FakeEngine(), publisher=RecordingPublisher(acker),
               checkouts=Checkouts(tmp / "checkouts", git=git), base_sha=base_sha,
               installation_id=installation.id, alice_id=alice.id)


def github_publisher(sim: Sim) -> GitHubPublisher:
    """The daemon's publisher over the simulated GitHub."""
    return GitHubPublisher(
        store=sim.store, github=sim.github,
        installations=Installations(sim.store, sim.github), clock=sim.world.clock.now,
        config=PublishConfig, mention="@claude", bot_login=lambda: "pr-reviewer[bot]")


async def close_sim(sim: Sim) -> None:
    await sim.github.aclose()
    sim.store.close()


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def contains_bytes(root: Path, needle: bytes) -> list[Path]:
    """Every file under ``root`` whose bytes contain ``needle``."""
    return [p for p in files_under(root) if needle in p.read_bytes()]


@pytest.fixture(name="sim")
async def worker_sim(tmp_path: Path) -> AsyncIterator[Sim]:
    """A ``Sim`` in ``tmp_path``, closed after the test (import it to use ``sim``)."""
    s = build_sim(tmp_path)
    try:
        yield s
    finally:
        await close_sim(s)
