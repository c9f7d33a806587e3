"""``pr-review-agent review``: one review of a pull request now, in this process.

``review`` runs one review of a pull request now, in this process, through exactly what
the daemon's workers use: the queue, the budget governor (and so the ledger), the job
runner, the engine and the publisher. It is a ``pr_opened`` job at the pull request's
current head — the same dedupe key the webhook and the poller build for that head, so the
review is never paid for twice whichever comes first — enqueued if it is not queued yet,
then claimed *by key* (the admit hook refuses every other row, which costs them nothing)
and run inline. Consequences an operator should know:

- a head already reviewed is not reviewed again (its row is ``done``); the command says so
  and points at the run;
- a row a running ``serve`` is working on (a live lease) is left to it;
- the budget decides as it does for the daemon: a refusal is printed with its reason and
  nothing is spent;
- ``--dry-run`` records the run with ``publish_outcome = 'dry_run'`` and posts nothing —
  not even the 👀. That head then counts as reviewed; docs/OPERATIONS.md says how to post
  such a run for real later.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO, TypeVar, cast

import anyio
import httpx

from service.app.identity import AppIdentity
from service.app.runners import engine_isolation_problem
from service.app.services import service_redactor
from service.budget.governor import Governor
from service.config.errors import ConfigError
from service.config.schema import Config
from service.config.strict_yaml import load_config
from service.engine.factory import engine_homes
from service.github.client import GitHubClient
from service.github.errors import GitHubError, NotFound
from service.github.names import validate_repo
from service.github.pulls import read_pull
from service.model.jobs import Job
from service.observe.health import Health
from service.publish.github import GitHubPublisher
from service.review.checkout import Checkouts
from service.review.installations import Installations
from service.review.job import JobRunner
from service.review.pool import owner_id
from service.review.repository_config import RepositoryConfigs
from service.review.routing import build_routes
from service.runtime.alongside import alongside
from service.storage import ledger, queue_lease, runs
from service.storage import queue as queue_table
from service.storage.database import Database, Transaction
from service.storage.open import open_store
from service.storage.queue import (
    ABANDONED,
    CLAIMED,
    DONE,
    PENDING,
    SUPERSEDED,
    Claim,
)
from service.storage.queue_enqueue import enqueue
from service.storage.queue_lease import Leasing

__all__ = ["ReviewReport", "load_or_report", "report_problems", "review", "review_once"]

log = logging.getLogger(__name__)
T = TypeVar("T")

Clock = Callable[[], datetime]

def _now() -> datetime:
    return datetime.now(UTC)


def load_or_report(path: str, err: TextIO) -> Config | None:
    """The config at ``path``, or None after printing every problem (as ``serve`` does)."""
    try:
        return load_config(path, os.environ)
    except ConfigError as exc:
        report_problems(path, exc, err)
        return None


def report_problems(path: str, exc: ConfigError, err: TextIO) -> None:
    """``PATH: N problem(s)`` and each problem on a line of its own."""
    print(f"{path}: {len(exc.problems)} problem(s)", file=err)
    for problem in exc.problems:
        print(f"  {problem}", file=err)


# --- review ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReviewReport:
    """What ``review_once`` did. ``ran`` is True when a job was claimed and run here;
    ``lines`` are what the command prints; ``ok`` decides the exit code."""

    dedupe_key: str | None
    ran: bool
    ok: bool
    lines: tuple[str, ...]


def _state_of(tx: Transaction, key: str) -> dict[str, object]:
    """The queue row, the newest ledger row and the run of ``key``, for the report."""
    return {"queue": queue_table.inspect(tx, key), "ledger": ledger.latest(tx, key),
            "run": runs.inspect(tx, key)}


def _describe(state: Mapping[str, object]) -> list[str]:
    lines = []
    ledger = state["ledger"]
    if isinstance(ledger, dict):
        used = "not settled" if ledger["stop_reason"] is None else (
            f"{ledger['stop_reason']}, {ledger['used_tokens']} tokens "
            f"({ledger['usage_confidence']})")
        lines.append(f"ledger: {used}; {ledger['reserved_tokens']} reserved, "
                     f"mode {ledger['mode']}")
    run = state["run"]
    if isinstance(run, dict):
        findings = len(json.loads(str(run["findings"] or "[]")))
        lines.append(f"run: {run['outcome']}, {findings} finding(s)")
        if run["publish_failed_at"] is not None:
            lines.append(f"publication: given up at {run['publish_failed_at']} "
                         "(docs/OPERATIONS.md: clearing a publish failure)")
        elif run["publish_outcome"] is None:
            lines.append("publication: not yet; the daemon's re-offer loop will try again")
        else:
            posted = f" (id {run['comment_id']})" if run["comment_id"] is not None else ""
            lines.append(f"publication: {run['publish_outcome']}{posted}")
    elif isinstance(ledger, dict) and ledger["stop_reason"] is not None:
        lines.append("run: none recorded (the ledger's stop reason says why)")
    queue = state["queue"]
    if isinstance(queue, dict):
        lines.append(f"queue: {queue['status']} after {queue['attempts']} attempt(s)")
    return lines


def _only(key: str, governor: Governor
          ) -> Callable[[Transaction, Claim, datetime], bool]:
    """An admit hook that offers ``key`` alone to the governor; other rows stay as they are
    (a refused candidate costs nothing and is left for the daemon's workers)."""
    def admit(conn: Transaction, claim: Claim, now: datetime) -> bool:
        return claim.dedupe_key == key and governor.admit(conn, claim, now)
    return admit


async def review_once(config: Config, repo: str, pr_number: int, *, dry_run: bool,
                      environ: Mapping[str, str], clock: Clock = _now,
                      transport: httpx.AsyncBaseTransport | None = None) -> ReviewReport:
    """Review ``repo``'s pull request ``pr_number`` at its current head, now (see the
    module docstring). Raises ``GitHubError`` when GitHub cannot be asked."""
    validate_repo(repo)
    if pr_number < 1:
        raise ValueError(f"a pull request number is at least 1, got {pr_number}")
    allowed = {r.casefold() for r in config.github.repositories}
    if allowed and repo.casefold() not in allowed:
        return ReviewReport(None, False, False, (
            f"{repo} is not in github.repositories; this agent does not review it",))
    if dry_run:
        config = dataclasses.replace(
            config, publish=dataclasses.replace(config.publish, dry_run=True))
    store = open_store(config.store)
    try:
        async with GitHubClient.from_config(
                config.github, clock=clock, transport=transport,
                redactor=service_redactor(config, environ)) as github:
            session = _Session(config=config, store=store, github=github, environ=environ,
                               clock=clock)
            return await _review(session, repo, pr_number)
    finally:
        store.close()


@dataclass
class _Session:
    """What one ``review`` command builds: the daemon's parts, for one job."""

    config: Config
    store: Database
    github: GitHubClient
    environ: Mapping[str, str]
    clock: Clock

    def __post_init__(self) -> None:
        # Looking up the policy is not publishing one: that is the daemon's business.
        self.governor = Governor(self.store, self.config.budget, clock=self.clock,
                                 publish=False)
        self.leasing = Leasing(lease=timedelta(seconds=self.config.workers.lease_seconds))
        config = self.config
        self.repo_configs = RepositoryConfigs(
            store=self.store, github=self.github, clock=self.clock,
            config=lambda: config.repository_config, triggers=lambda: config.triggers)
        self.identity = AppIdentity(self.config, self.store,
                                    repo_triggers=self.repo_configs.triggers)
        self.installations = Installations(self.store, self.github)

    def job_runner(self) -> JobRunner:
        """The daemon's job runner and publisher, as ``service.app.runners`` wires them."""
        config, identity = self.config, self.identity
        publisher = GitHubPublisher(
            store=self.store, github=self.github, installations=self.installations,
            clock=self.clock, config=lambda: config.publish, mention=config.triggers.mention,
            bot_login=lambda: f"{identity.slug}[bot]" if identity.slug else None,
            checks=lambda: config.checks, repo_config=self.repo_configs.stored,
            review=lambda: config.review)
        routes = build_routes(config.engine, self.environ, clock=self.clock,
                              home_root=engine_homes(config))
        return JobRunner(
            store=self.store, leasing=self.leasing, governor=self.governor, github=self.github,
            installations=self.installations,
            checkouts=Checkouts(Path(config.store.path).parent / "checkouts"),
            engine=routes[-1].engine, routes=routes,
            publisher=publisher, clock=self.clock, config=config,
            repo_configs=self.repo_configs)


async def _review(session: _Session, repo: str, pr_number: int) -> ReviewReport:
    store, clock = session.store, session.clock
    await session.identity.resolve(session.github, Health(store), clock)  # for markers
    try:
        installation = await session.installations(repo)
    except NotFound:
        return ReviewReport(None, False, False, (f"the App is not installed on {repo}",))
    where = f"{repo}#{pr_number}"
    try:
        pull = await read_pull(session.github, installation, repo, pr_number)
    except NotFound:
        return ReviewReport(None, False, False, (f"{where}: no such pull request",))
    if not pull.open:
        how = "merged" if pull.merged else "closed"
        return ReviewReport(None, False, False, (f"{where} is {how}; nothing to review",))
    job = Job(kind="pr_opened", repo=repo, pr_number=pr_number, actor_id=pull.author_id,
              head_sha=pull.head_sha)
    key = job.dedupe_key
    header = f"{where} at {pull.head_sha}: {key}"
    new = await store.write_async(lambda tx: enqueue(tx, job, now=clock()))
    row = await store.read_async(queue_table.row, key)
    assert row is not None  # just enqueued, or already there
    if row.status == DONE:
        state = await store.read_async(_state_of, key)
        return ReviewReport(key, False, True, (
            header, "already reviewed at this head; not reviewing it again", *_describe(state)))
    if row.status in (ABANDONED, SUPERSEDED):
        return ReviewReport(key, False, False, (
            header, f"the queue row for this head is {row.status}; not reviewing it"))
    owner = owner_id(0)
    claim = await store.run(lambda: queue_lease.claim(
        store, session.leasing, now=clock, owner=owner, admit=_only(key, session.governor),
        lapsed=session.governor.close_lapsed))
    if claim is None:
        why = await store.run(_unclaimed, store, session.governor, key, clock)
        return ReviewReport(key, False, False, (header, why))
    dry_run = session.config.publish.dry_run
    log.info("operator review claimed", extra={
        "repo": repo, "pr": pr_number, "dedupe_key": key, "attempt": claim.lease.attempt,
        "owner": owner, "enqueued": new, "dry_run": dry_run})
    await session.job_runner()(claim)
    state = await store.read_async(_state_of, key)
    queue_state = state["queue"]
    done = isinstance(queue_state, dict) and queue_state["status"] == DONE
    mode = " (dry run: nothing posted)" if dry_run else ""
    return ReviewReport(key, True, done, (header + mode, *_describe(state)))


def _unclaimed(store: Database, governor: Governor, key: str, clock: Clock) -> str:
    """Why the claim of ``key`` found nothing to take."""
    with store.read() as tx:
        row = queue_table.row(tx, key)
    if row is not None and row.status == CLAIMED and row.leased_until is not None \
            and row.leased_until > clock():
        return (f"a worker is reviewing it now (owner {row.owner}, lease until "
                f"{row.leased_until.isoformat()})")
    refusal = governor.refusals.get(key) or governor.last_refusal
    if refusal is not None:
        window = f", window {refusal.window}" if refusal.window else ""
        frees = f", frees at {refusal.frees_at.isoformat()}" if refusal.frees_at else ""
        return (f"the budget refused it ({refusal.reason}{window}{frees}); "
                "nothing was spent; see pr-review-agent budget")
    if row is not None and row.status == PENDING and row.leased_until is not None \
            and row.leased_until > clock():
        return (f"attempt {row.attempts} failed; it is tried again from "
                f"{row.leased_until.isoformat()} (pr-review-agent serve does, or run this "
                "command then)")
    return "another review of this pull request is running; try again when it is done"


async def until_interrupted(work: Awaitable[T]) -> T:
    """``await work``, cancelled through an anyio cancel scope on Ctrl-C; then
    ``KeyboardInterrupt``.

    ``asyncio.run`` answers Ctrl-C with a bare ``Task.cancel()`` of the main task, which
    an anyio cancel scope it lands in may take for its own and absorb: the review then
    ran on to its end. Cancelling a scope of our own reaches every level, so the job
    settles and hands its row back at once.
    """
    async def watch(scope: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                scope.cancel()
                return

    finished, result = await alongside(work, watch)
    if not finished:
        raise KeyboardInterrupt
    return cast(T, result)  # finished: the work's own result


def review(config: Config, repo: str, pr_number: int, *, dry_run: bool, out: TextIO,
           err: TextIO, environ: Mapping[str, str] | None = None,
           config_path: str | None = None) -> int:
    """``pr-review-agent review``: 0 when the job ended (or the head was already
    reviewed), 1 when it could not run or was handed back for another attempt."""
    environ = os.environ if environ is None else environ
    problem = engine_isolation_problem(config, config_path, environ)
    if problem is not None:
        print(f"review: the engine may not run here: {problem}", file=err)
        return 1
    try:
        report = asyncio.run(until_interrupted(review_once(
            config, repo, pr_number, dry_run=dry_run, environ=environ)))
    except ValueError as exc:
        print(f"review: {exc}", file=err)
        return 2
    except (GitHubError, httpx.HTTPError) as exc:
        print(f"review: GitHub could not be asked: {exc or type(exc).__name__}", file=err)
        return 1
    except KeyboardInterrupt:
        # The job runner settles a cancelled attempt and hands its row back first.
        print("review: interrupted; a review already claimed was handed back to the queue",
              file=err)
        return 130
    for line in report.lines:
        print(line, file=out if report.ok else err)
    return 0 if report.ok else 1


