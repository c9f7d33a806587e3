"""A simulated GitHub wired to a real store, queue, governor and ``GitHubPublisher``: the
fixture the publisher, notice and retention tests share.

``Rig.create(tmp_path)`` builds the simulator's ``World`` (clock frozen at ``T0``, one App,
one installation on ``acme/widgets``, people who may ask), a real ``GitHubClient`` reaching
it through ``SimulatorTransport`` with a sleep that advances the simulated clock and
records each wait, and a real ``SqliteStore``, ``QueueDriver`` and ``Governor``. Runs are
recorded the way the worker records them: claimed through the governor, then settled,
recorded and finished in one transaction. No git: pull requests are seeded with diffs.

This module holds no tests; it is named ``test_publisher_*`` because the publisher's
tests own that name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import pytest

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.config.posting import ChecksConfig, PublishConfig
from service.config.schema import BudgetConfig
from service.config.secret import Secret
from service.engine.base import Assessment, Description, Finding
from service.github.auth import AppJWT
from service.github.client import GitHubClient
from service.model.jobs import Job
from service.observe.health import Health
from service.publish.checks.loop import CheckRuns
from service.publish.checks.marks import CheckMarks
from service.publish.github import GitHubPublisher
from service.publish.publication import Publication, RunAccount
from service.publish.run import RecordedRun, record_run
from service.publish.run_content import AskAnswer, Coverage, Omitted
from service.storage import queue_lease
from service.storage.database import Database
from service.storage.queue import Claim
from tests.kit.queue import QueueDriver
from tests.kit.stores import BACKENDS, new_sqlite_store, open_database
from tests.simulator import SimClock, SimulatorTransport, World
from tests.simulator.harness import SAMPLE_DIFF, app_key_pair
from tests.simulator.models import (
    CheckRun,
    IssueComment,
    PullRequest,
    Review,
    ReviewComment,
)

API = "https://api.github.com"
APP_ID = 4242
SLUG = "pr-reviewer"
BOT = f"{SLUG}[bot]"
REPO = "acme/widgets"
OWNER = "host:1:w0"
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
BASE = "0a" * 20
HEAD = "1b" * 20
NEW_HEAD = "2c" * 20
PHRASE = "@claude"
#: SAMPLE_DIFF's src/app.py shows new lines 1-7 and 21-24, old lines 1-6 and 20-23.
ANCHORED = Finding(path="src/app.py", line=3, side="RIGHT", start_line=2, severity="major",
                   category="correctness", title="json is imported twice",
                   body="The second import shadows the first.")
UNANCHORED = Finding(path="src/app.py", line=12, side="RIGHT", start_line=None,
                     severity="minor", category="maintainability", title="helper is long",
                     body="Consider splitting `helper`.")

KEY = "mention:acme/widgets:7:123"
ACCOUNT = RunAccount(tokens=1234, reserved=60_000, confidence="exact", engine="claude_code",
                     model="m-1", mode="full", stop_reason="completed", reviewed_since=None)


def publication(**changes: object) -> Publication:
    """A mention's review with one anchored and one unanchored finding, as the publisher
    loads it; ``changes`` replace its fields."""
    base = Publication(
        dedupe_key=KEY, kind="mention", command="review", repo="acme/widgets", pr_number=7,
        head_sha=HEAD, comment_id=123, comment_source="issue", outcome="completed",
        findings=(ANCHORED, UNANCHORED), assessment=Assessment("Looks fine.", "low"),
        description=None, omitted=(), account=ACCOUNT, attempts=1)
    return replace(base, **changes)  # type: ignore[arg-type]


def budget(*, session: int = 1_000_000, weekly: int = 10_000_000, run: int = 10_000,
           enabled: bool = True) -> BudgetConfig:
    return BudgetConfig(enabled=enabled, session_tokens=session, weekly_tokens=weekly,
                        max_run_tokens=run, reviewer_share_pct=100)


@dataclass
class Rig:
    """Everything one publisher test touches."""

    world: World
    github: GitHubClient
    store: Database
    queue: QueueDriver
    governor: Governor
    installation_id: int
    config: PublishConfig = field(default_factory=PublishConfig)
    checks: ChecksConfig = field(default_factory=ChecksConfig)
    sleeps: list[float] = field(default_factory=list)
    _publishers: list[GitHubPublisher] = field(default_factory=list)

    @classmethod
    def create(cls, tmp_path: Path, *, budget_config: BudgetConfig | None = None,
               store: Database | None = None) -> Rig:
        private_pem, public_pem = app_key_pair()
        world = World(clock=SimClock(frozen_at=T0))
        world.add_app(id=APP_ID, slug=SLUG, public_key_pem=public_pem, owner="acme")
        world.add_repository(REPO)
        installation = world.add_installation(account="acme", repositories=[REPO])
        for login in ("alice", "bob", "carol"):
            world.add_user(login, association="MEMBER")
        sleeps: list[float] = []

        async def virtual_sleep(seconds: float) -> None:
            sleeps.append(seconds)
            world.clock.advance(seconds)

        github = GitHubClient(API, app_jwt=AppJWT(APP_ID, Secret(private_pem), world.clock.now),
                              clock=world.clock.now, transport=SimulatorTransport(world),
                              sleep=virtual_sleep)
        store = store if store is not None else new_sqlite_store(tmp_path / "state.db")
        return cls(world=world, github=github, store=store, queue=QueueDriver(store),
                   governor=Governor(store, budget_config or budget(), clock=world.clock.now),
                   installation_id=installation.id, sleeps=sleeps)

    async def aclose(self) -> None:
        await self.github.aclose()
        self.store.close()

    def now(self) -> datetime:
        return self.world.clock.now()

    # -- the publisher --------------------------------------------------------------------

    async def installations(self, repo: str) -> int:
        assert repo == REPO
        return self.installation_id

    def publisher(self, **options: Any) -> GitHubPublisher:
        """A fresh publisher (a second one is what a restart looks like); ``options`` are
        more of ``GitHubPublisher``'s arguments (``review=``, ``repo_config=``)."""
        publisher = GitHubPublisher(
            store=self.store, github=self.github, installations=self.installations,
            clock=self.world.clock.now, config=lambda: self.config, mention=PHRASE,
            bot_login=lambda: BOT, checks=lambda: self.checks, **options)
        self._publishers.append(publisher)
        return publisher

    def check_runs(self, *, health: Health | None = None) -> CheckRuns:
        """The check-run loop (a fresh one is what a restart looks like)."""
        return CheckRuns(store=self.store, github=self.github,
                         installations=self.installations, governor=self.governor,
                         config=lambda: self.checks, publish=lambda: self.config,
                         clock=self.world.clock.now, max_attempts=self.queue.max_attempts,
                         health=health)

    def github_check_runs(self, head: str | None = None) -> list[CheckRun]:
        """The check runs on GitHub (on ``head``), oldest first."""
        return sorted((r for r in self.world.check_runs.values()
                       if head is None or r.head_sha == head), key=lambda r: r.id)

    def set_config(self, **changes: Any) -> None:
        self.config = replace(self.config, **changes)

    # -- GitHub's side --------------------------------------------------------------------

    def add_pull(self, *, diff: str = SAMPLE_DIFF, head: str = HEAD, body: str = "Author text.",
                 user: str = "alice") -> PullRequest:
        return self.world.add_pull(REPO, title="Add logging", user=user, head_sha=head,
                                   base_sha=BASE, diff=diff, body=body)

    def ask(self, pr: PullRequest, *, command: str = "review", user: str = "bob") -> Job:
        comment = self.world.add_issue_comment(REPO, pr.number, user=user,
                                               body=f"{PHRASE} {command}")
        return Job(kind="mention", repo=REPO, pr_number=pr.number,
                   actor_id=self.world.user(user).id, comment_id=comment.id,
                   comment_source="issue", command=command)  # type: ignore[arg-type]

    def opened(self, pr: PullRequest, head: str = HEAD) -> Job:
        return Job(kind="pr_opened", repo=REPO, pr_number=pr.number,
                   actor_id=self.world.user("alice").id, head_sha=head)

    def reviews(self, pr: PullRequest) -> list[Review]:
        return [r for r in self.world.reviews.values()
                if r.pull_number == pr.number and r.user.login == BOT]

    def comments(self, pr: PullRequest) -> list[IssueComment]:
        return [c for c in self.world.issue_comments.values()
                if c.issue_number == pr.number and c.user.login == BOT]

    def inline(self, pr: PullRequest) -> list[ReviewComment]:
        return [c for c in self.world.review_comments.values()
                if c.pull_number == pr.number and c.user.login == BOT]

    # -- the store ------------------------------------------------------------------------

    def claim(self, job: Job) -> Claim:
        assert self.queue.enqueue(job, now=self.now())
        claim = self.queue.claim(now=self.now(), owner=OWNER, admit=self.governor.admit)
        assert claim is not None and claim.dedupe_key == job.dedupe_key
        return claim

    def record(self, job: Job, *, findings: Sequence[Finding] = (),
               assessment: Assessment | None = None, description: Description | None = None,
               outcome: str = "completed", stop_reason: str = "completed",
               omitted: Sequence[Omitted] = (), head: str = HEAD,
               usage: Usage | None = None, reviewed_since: str | None = None,
               coverage: Coverage | None = None,
               answer: AskAnswer | None = None) -> RecordedRun:
        """Claim ``job`` and record its run as the worker does (settle + record + finish)."""
        return self.complete(self.claim(job), findings=findings, assessment=assessment,
                             description=description, outcome=outcome,
                             stop_reason=stop_reason, omitted=omitted, head=head, usage=usage,
                             reviewed_since=reviewed_since, coverage=coverage, answer=answer)

    def complete(self, claim: Claim, *, findings: Sequence[Finding] = (),
                 assessment: Assessment | None = None, description: Description | None = None,
                 outcome: str = "completed", stop_reason: str = "completed",
                 omitted: Sequence[Omitted] = (), head: str = HEAD,
                 usage: Usage | None = None, reviewed_since: str | None = None,
                 coverage: Coverage | None = None,
                 answer: AskAnswer | None = None) -> RecordedRun:
        """Record the run of an earlier ``claim`` now (settle + record + finish)."""
        if (assessment is None and description is None and claim.job.command == "review"
                and findings):
            assessment = Assessment("Mostly fine.", "medium")
        run = RecordedRun(
            claim=claim, head_sha=head, base_sha=BASE, reviewed_since=reviewed_since,
            outcome=outcome,  # type: ignore[arg-type]
            stop_reason=stop_reason, findings=tuple(findings), assessment=assessment,
            description=description, omitted=tuple(omitted),
            usage=usage or Usage(tokens=4321, confidence="exact", engine="claude_code",
                                 model="claude-test-1"),
            recorded_at=self.now(), coverage=coverage, answer=answer)
        marks = CheckMarks(lambda: self.checks)
        target = marks.target(claim.dedupe_key, claim.job.command, REPO, claim.job.pr_number, head)
        with self.store.transaction() as conn:  # the job starts: its check run in progress
            marks.start(conn, target, claim.lease.attempt, self.now())
        with self.store.transaction() as conn:
            assert self.governor.settle(claim, run.usage, now=self.now(), stop_reason=stop_reason,
                                        reviewed_lines=10, reviewed_since=reviewed_since,
                                        conn=conn)
            record_run(conn, run)
            assert queue_lease.finish(conn, claim.dedupe_key, claim.lease.owner)
        return run

    def settle_refused(self, job: Job) -> Claim:
        """What the worker does for a pre-flight refusal: settle at zero, no run."""
        claim = self.claim(job)
        with self.store.transaction() as conn:
            assert self.governor.settle(claim, Usage(0, "exact", None, None), now=self.now(),
                                        stop_reason="refused", conn=conn)
            assert queue_lease.finish(conn, claim.dedupe_key, claim.lease.owner)
        return claim

    def row(self, table: str, where: str, *args: object) -> dict[str, Any]:
        rows = self.rows(table, where, *args)
        assert len(rows) == 1, rows
        return rows[0]

    def rows(self, table: str, where: str = "1 = 1", *args: object) -> list[dict[str, Any]]:
        with self.store.read() as conn:
            cursor = conn.execute(f"SELECT * FROM {table} WHERE {where}", args)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, values, strict=True)) for values in cursor]

    def run_row(self, key: str) -> dict[str, Any]:
        return self.row("runs", "dedupe_key = ?", key)

    def agent_comment_ids(self) -> set[int]:
        return {int(r["comment_id"]) for r in self.rows("agent_comments")}

    def advance(self, **kw: float) -> None:
        self.world.clock.advance(timedelta(**kw).total_seconds())


@pytest.fixture(name="rig", params=BACKENDS)
async def publisher_rig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rig]:
    """A publisher ``Rig`` in ``tmp_path`` on each backend in turn, closed after the test
    (import it to use ``rig``). A test module may set ``RIG_BUDGET`` (a ``BudgetConfig``)
    for its rigs."""
    budget_config = getattr(request.module, "RIG_BUDGET", None)
    with open_database(request.param, tmp_path) as store:
        rig = Rig.create(tmp_path, budget_config=budget_config, store=store)
        try:
            yield rig
        finally:
            await rig.aclose()


REVIEWS: Final = f"/repos/{REPO}/pulls/*/reviews"
ISSUE_COMMENTS: Final = f"/repos/{REPO}/issues/*/comments"


def posts(rig: Rig, glob: str) -> list[Any]:
    """The POSTs the simulator has seen to paths matching ``glob``."""
    return list(rig.world.requests.matching("POST", glob))
