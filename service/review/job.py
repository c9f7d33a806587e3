"""One job, from a claim to a finished queue row (docs/WORKER.md walks through it).

A claimed job always ends in exactly one of:

- **settled and finished**: the ledger row settled with an honest stop reason and usage,
  the queue row ``done``, and — when an engine ran or there was nothing to review — a
  ``runs`` row, all in one transaction, before anything is published;
- **settled and released** (something unexpected broke, or the engine could not start
  and spent nothing): the ledger row settled as ``infrastructure`` or
  ``engine_unavailable``, the queue row back to ``pending`` for another attempt after
  the retry delay (attempts still count; after the last one the queue abandons it);
- **nothing** because the lease was lost: a later claim closed this attempt's
  reservation as ``lost`` and the work belongs to that claim now.

No SQLite transaction is ever held across a GitHub, git or engine call: every store
access is one short transaction on a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Final

import anyio
import httpx

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.config.repository.keys import RepoSettings
from service.config.repository.merge import Effective
from service.config.schema import ChecksConfig, Config, EngineConfig, ReviewConfig, TriggersConfig
from service.engine.base import Engine, EngineRequest, EngineResult, ReviewMode, unknown_usage
from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.pulls import PullRequest, read_pull
from service.github.threads import review_threads
from service.model.jobs import Job
from service.observe.health import Health
from service.observe.metrics.instruments import Metrics
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.ports import Publisher
from service.publish.run import Outcome, RecordedRun
from service.review.checkout import BareRepo, Checkouts
from service.review.diff import Selection, read_diff, select
from service.review.estimate import Estimator, load_estimator
from service.review.repository import declined_by, fingerprinted
from service.review.repository_config import RepositoryConfigs
from service.review.settle import NOTHING_SPENT, Settlement, log_extra
from service.review.threads import NO_THREADS, ThreadsView, fixed_threads, view
from service.storage import ledger, posted_findings, runs
from service.storage.database import Database
from service.storage.queue import Claim, ReviewQueue

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: Review guidelines are read from the BASE commit (never the head, which the author of
#: the pull request controls): the first of these files that exists.
GUIDELINE_PATHS: Final = ("REVIEW.md", ".github/REVIEW.md", "CLAUDE.md")
#: How long past ``engine.wall_clock_seconds`` the worker waits for an engine that should
#: have stopped itself, before giving up on it as timed out.
ENGINE_GRACE_SECONDS: Final = 60.0
#: How long a row waits after a failed attempt before it can be claimed again: after the
#: first failure, and after every later one. Without a wait, the three attempts of a job
#: that GitHub fails are spent within seconds of an outage, and the request abandoned.
RETRY_DELAYS: Final = (timedelta(minutes=1), timedelta(minutes=4))
HEAD_REF: Final = "refs/agent/pull/"
BASE_REF: Final = "refs/agent/base/"


class CheckoutError(RuntimeError):
    """The fetched repository does not hold the commit the pull request names."""


@dataclass(frozen=True)
class JobSettings:
    """The configuration a job reads (``from_config`` takes it from ``Config``); the
    config's keys default to what their declarations say."""

    excluded_paths: tuple[str, ...] = ReviewConfig.excluded_paths
    max_diff_lines: int = ReviewConfig.max_diff_lines
    max_turns: int = EngineConfig.max_turns
    wall_clock_seconds: float = float(EngineConfig.wall_clock_seconds)
    auto_review: bool = TriggersConfig.auto_review
    mention: str = TriggersConfig.mention
    checks: ChecksConfig = field(default_factory=ChecksConfig)
    estimate_default: Estimator = field(default_factory=Estimator)
    engine_grace_seconds: float = ENGINE_GRACE_SECONDS
    guideline_paths: tuple[str, ...] = GUIDELINE_PATHS
    #: A repository's own words for the reviewer, and the language of the review text
    #: (``.github/pr-review-agent.yml``); None: none, and English.
    instructions: str | None = None
    language: str | None = None
    #: Who may decline a finding on its thread (the people who may ask), and the replies
    #: that decline it.
    triggers: TriggersConfig = field(default_factory=TriggersConfig)
    decline_phrases: tuple[str, ...] = ReviewConfig.decline_phrases
    #: Read from the module at construction, so a test can shorten it.
    retry_delays: tuple[timedelta, ...] = field(default_factory=lambda: RETRY_DELAYS)

    def for_repository(self, settings: RepoSettings) -> JobSettings:
        """These settings with a repository's keys applied where its file sets them."""
        changes: dict[str, object] = {}
        if settings.excluded_paths:
            # Added to the operator's, never replacing them: a repository cannot un-exclude.
            changes["excluded_paths"] = self.excluded_paths + tuple(
                p for p in settings.excluded_paths if p not in self.excluded_paths)
        if settings.guidelines is not None:
            changes["guideline_paths"] = (settings.guidelines,)
        if settings.instructions is not None:
            changes["instructions"] = settings.instructions
        if settings.language is not None:
            changes["language"] = settings.language
        if settings.fail_on_set:
            changes["checks"] = replace(self.checks, fail_on=settings.fail_on)
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]

    @classmethod
    def from_config(cls, config: Config) -> JobSettings:
        return cls(excluded_paths=config.review.excluded_paths,
                   max_diff_lines=config.review.max_diff_lines,
                   max_turns=config.engine.max_turns,
                   wall_clock_seconds=float(config.engine.wall_clock_seconds),
                   auto_review=config.triggers.auto_review,
                   mention=config.triggers.mention, checks=config.checks,
                   triggers=config.triggers, decline_phrases=config.review.decline_phrases)


@dataclass
class _Progress:
    """How far one attempt got: what the failure path must charge."""

    engine_started: bool = False
    result: EngineResult | None = None
    done: bool = False  # settled (or found lost): the failure path has nothing to do


@dataclass(frozen=True)
class _Plan:
    """What the preparation found: enough to run the engine."""

    pull: PullRequest
    bare: BareRepo
    since: str | None
    selection: Selection
    reserved: int
    guidelines: str | None
    extra: dict[str, object]
    settings: JobSettings
    threads: ThreadsView = NO_THREADS


def outcome_for(stop_reason: str, truncated_by_size: bool) -> Outcome:
    """``runs.outcome`` for an engine's stop reason."""
    if stop_reason == "completed":
        return "truncated" if truncated_by_size else "completed"
    if stop_reason == "truncated":
        return "truncated"
    return "failed"


def refspecs(pull: PullRequest) -> tuple[str, str]:
    """The head (GitHub's ``refs/pull/<n>/head``, which also serves forks) and the base
    branch, into a namespace of the cache's own, named by pull request number (branch
    names can nest, ``release`` and ``release/1.2``; numbers cannot)."""
    return (f"+refs/pull/{pull.number}/head:{HEAD_REF}{pull.number}",
            f"+refs/heads/{pull.base_ref}:{BASE_REF}{pull.number}")


class JobRunner:
    """Runs one claimed job end to end; ``await runner(claim)`` never raises for the job's
    own failures (it settles, releases and logs them), only for cancellation."""

    def __init__(
        self,
        *,
        store: Database,
        queue: ReviewQueue,
        governor: Governor,
        github: GitHubClient,
        installations: Callable[[str], Awaitable[int]],
        checkouts: Checkouts,
        engine: Engine,
        publisher: Publisher,
        clock: Clock,
        settings: JobSettings | None = None,
        health: Health | None = None,
        repo_configs: RepositoryConfigs | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings or JobSettings()
        self._metrics = metrics
        self._repo_configs = repo_configs
        self._store = Settlement(store, queue, governor, clock,
                                 CheckMarks(lambda: self.settings.checks))
        self._health = health
        self._governor = governor
        self._github = github
        self._installations = installations
        self._checkouts = checkouts
        self._engine = engine
        self._publisher = publisher
        self._clock = clock

    async def __call__(self, claim: Claim) -> None:
        progress = _Progress()
        extra = log_extra(claim)
        try:
            await self._run(claim, progress, extra)
        except Exception:
            log.exception("job failed; settling it as infrastructure and handing it back",
                          extra=extra)
            await self._give_back(claim, progress, retry_in=self._retry_delay(claim))
        except BaseException:
            # Cancelled (the pool's grace period ran out): settle and release before going.
            with anyio.CancelScope(shield=True):
                log.warning("job cancelled; settling it as infrastructure and handing it back",
                            extra=extra)
                await self._give_back(claim, progress)
            raise

    # -- the steps ------------------------------------------------------------------------

    async def _run(self, claim: Claim, progress: _Progress, extra: dict[str, object]) -> None:
        plan = await self._prepare(claim, progress, extra)
        if plan is not None:
            await self._review(claim, plan, progress)

    async def _prepare(self, claim: Claim, progress: _Progress, extra: dict[str, object]
                       ) -> _Plan | None:
        """Steps 1-5: everything before the engine. None when the job ended here."""
        reserved = await self._store.read(ledger.open_reserved, claim.dedupe_key, claim.owner)
        if reserved is None:
            progress.done = True
            log.warning("the reservation is no longer open (lease lost); not starting",
                        extra=extra)
            return None
        await self._ack(claim, extra)

        installation = await self._installations(claim.repo)
        pull = await read_pull(self._github, installation, claim.repo, claim.pr_number)
        if not pull.open:
            await self._store.settle_zero(
                claim, "closed", check=partial(text.closed, pull.merged),
                head_sha=claim.head_sha or pull.head_sha)
            progress.done = True
            log.info("pull request %s; nothing to review", "merged" if pull.merged else "closed",
                     extra=extra)
            return None
        if claim.kind == "pr_opened" and pull.head_sha != claim.head_sha:
            await self._supersede(claim, pull, extra)
            progress.done = True
            return None
        repository = await self._repository(installation, claim, extra)
        settings = self.settings.for_repository(repository.settings)
        if claim.kind == "pr_opened" and await self._declined(claim, pull, repository, extra):
            progress.done = True
            return None
        await self._store.started(claim, pull.head_sha)
        threads = (await self._threads(installation, claim, pull, extra)
                   if claim.command == "review" else NO_THREADS)

        bare, pull = await self._checkout(claim, pull, installation)
        since = await self._since(claim, pull, bare, extra)
        files = await read_diff(bare, since or pull.base_sha, pull.head_sha)
        selection = select(files, excluded=settings.excluded_paths,
                           max_lines=settings.max_diff_lines)
        extra = {**extra, "lines": selection.lines, "reviewed_since": since}
        if not selection.files:
            if selection.truncated:
                log.warning("every file is over review.max_diff_lines; refused", extra=extra)
                sizes = [o.lines for o in selection.omitted if o.reason == "max_diff_lines"]
                await self._store.settle_zero(
                    claim, "refused", head_sha=pull.head_sha, check=partial(
                        text.refused_size, len(sizes), max(sizes),
                        self.settings.max_diff_lines, self.settings.mention))
            else:
                await self._nothing_to_review(claim, pull, since, selection, extra)
            progress.done = True
            return None

        estimator = await self._store.read(load_estimator, self._engine.name,
                                           self.settings.estimate_default)
        estimate = estimator.tokens(selection.lines)
        if estimate > reserved:
            log.warning("pre-flight estimate %d tokens exceeds the run's %d; refused",
                        estimate, reserved, extra={**extra, "fitted": estimator.samples})
            await self._store.settle_zero(
                claim, "refused", head_sha=pull.head_sha, check=partial(
                    text.refused_estimate, estimate, reserved, selection.lines,
                    self.settings.mention))
            progress.done = True
            return None
        return _Plan(pull=pull, bare=bare, since=since, selection=selection, reserved=reserved,
                     guidelines=await self._guidelines(bare, pull.base_sha, settings),
                     extra=extra, settings=settings, threads=threads)

    async def _review(self, claim: Claim, plan: _Plan, progress: _Progress) -> None:
        """Steps 6-7: the engine in a fresh worktree, then settle + record + finish, then
        publish."""
        if not await self._store.renew(claim):
            progress.done = True
            log.warning("lease lost before the engine started; not starting", extra=plan.extra)
            return
        pull, selection = plan.pull, plan.selection
        mode = await self._engine_mode(claim, plan.extra)
        async with self._checkouts.worktree(plan.bare, pull.head_sha, repo=claim.repo) as wd:
            request = self._request(claim, plan, wd, mode)
            progress.engine_started = True
            result = await self._run_engine(request, plan.extra)
            progress.result = result
        self._report_engine(result)
        if result.stop_reason == "engine_unavailable" and result.usage.tokens == 0:
            # Nothing ran and nothing was spent: the trigger is not used up. The row goes
            # back to wait for the engine, like a GitHub outage, rather than counting
            # this head as reviewed.
            log.warning("the engine could not start (%s); the request waits for it",
                        result.detail, extra=plan.extra)
            await self._give_back(claim, progress, retry_in=self._retry_delay(claim),
                                  stop_reason="engine_unavailable")
            return
        if result.stop_reason == "usage_limit":
            # The plan's limit, not the trigger: the row waits for the reset and runs
            # again by itself, its attempt uncounted (the breaker trips in the settle).
            await self._store.defer_for_plan(claim, priced(result),
                                             result.usage_limit_resets_at)
            progress.done = True
            return

        run = RecordedRun(
            claim=claim, head_sha=pull.head_sha, base_sha=pull.base_sha,
            reviewed_since=plan.since,
            outcome=outcome_for(result.stop_reason, selection.truncated),
            stop_reason=result.stop_reason,
            findings=await fingerprinted(plan.bare, pull, result.findings),
            assessment=result.assessment, description=result.description,
            omitted=selection.omitted, usage=priced(result), recorded_at=self._clock(),
            detail=result.detail, resets_at=result.usage_limit_resets_at,
            fixed=fixed_threads(plan.threads, result),
        )
        committed = await self._store.commit(run, reviewed_lines=selection.lines)
        progress.done = True
        if committed:
            log.info("run recorded: %s (%s)", run.outcome, run.stop_reason, extra={
                **plan.extra, "tokens": run.usage.tokens, "confidence": run.usage.confidence,
                "findings": len(run.findings), "cost_usd": result.cost_usd,
                "detail": result.detail, "resets_at": result.usage_limit_resets_at})
            await self._publish(run, plan.extra)

    async def _checkout(self, claim: Claim, pull: PullRequest, installation: int
                        ) -> tuple[BareRepo, PullRequest]:
        """Fetch the head and the base into the bare cache with the installation token.

        The pull request's ``base.sha`` is the base branch's tip as GitHub last computed
        it; when a force-push to the base branch removed it, the tip just fetched is the
        base instead (GitHub would show the same diff against it).
        """
        token = await self._github.installation_token(installation)
        bare = await self._checkouts.fetch(claim.repo, pull.clone_url, refspecs(pull),
                                           token=token)
        del token
        if not await bare.has_commit(pull.head_sha):
            raise CheckoutError(f"commit {pull.head_sha} is not in the fetched repository")
        if not await bare.has_commit(pull.base_sha):
            tip = await bare.resolve(f"{BASE_REF}{pull.number}")
            log.info("the base sha is gone from the base branch; diffing against its tip",
                     extra={**log_extra(claim), "base_sha": pull.base_sha, "tip": tip})
            pull = replace(pull, base_sha=tip)
        return bare, pull

    async def _ack(self, claim: Claim, extra: dict[str, object]) -> None:
        try:
            await self._publisher.ack(claim)
        except Exception as exc:
            log.warning("acknowledgement failed (the job goes on): %s", type(exc).__name__,
                        extra={**extra, "error": str(exc)})

    async def _since(self, claim: Claim, pull: PullRequest, bare: BareRepo,
                     extra: dict[str, object]) -> str | None:
        """Where an incremental review starts, or None for the whole pull request.

        Only an automatic review of a new head is incremental, from the head of the last
        completed review; a mention (somebody asked) and a description see it all. When
        that head is no longer in the pull request's history (a force-push), the review
        covers everything again.
        """
        if claim.kind != "pr_opened" or claim.command != "review":
            return None
        previous = await self._store.read(runs.last_completed_head, claim.repo, claim.pr_number)
        if previous is None or previous == pull.head_sha:
            return None
        if await bare.has_commit(previous) and await bare.is_ancestor(previous, pull.head_sha):
            return previous
        log.info("the last reviewed head is gone from the history (force-push); full review",
                 extra={**extra, "previous_head": previous})
        return None

    async def _repository(self, installation: int, claim: Claim, extra: dict[str, object]
                          ) -> Effective:
        """The repository's own config, read afresh (never from the pull request's head)."""
        if self._repo_configs is None:
            return Effective()
        try:
            found = await self._repo_configs.fresh(installation, claim.repo)
        except Exception:
            # Never a reason to fail the review: the last read (or none) applies.
            log.exception("reading the repository's config failed; using the last read",
                          extra=extra)
            found = await anyio.to_thread.run_sync(self._repo_configs.stored, claim.repo)
        if found.notes:
            log.warning("the repository's config has problems; reviewing with the defaults "
                        "for what it could not set", extra={**extra, "problems": found.notes})
        return found

    async def _declined(self, claim: Claim, pull: PullRequest, repository: Effective,
                        extra: dict[str, object]) -> bool:
        """A ``pr_opened`` the repository's config has turned off since the ingest decided
        (on an older read): settled at zero, its check run saying which key."""
        pushed = await self._store.read(runs.last_completed_head, claim.repo,
                                        claim.pr_number) not in (None, pull.head_sha)
        key = declined_by(repository.settings, draft=pull.draft, pushed=pushed)
        if key is None:
            return False
        log.info("not reviewed: the repository's config sets %s", key, extra=extra)
        await self._store.settle_zero(
            claim, "refused", head_sha=pull.head_sha,
            check=lambda charged: text.with_config_notes(
                text.declined_by_repository(key, self.settings.mention, charged),
                repository.notes))
        return True

    async def _threads(self, installation: int, claim: Claim, pull: PullRequest,
                       extra: dict[str, object]) -> ThreadsView:
        """Read the threads of the App's earlier inline findings on this pull request:
        mark the ones people declined, and find the ones whose code changed for the engine
        to re-check (``worker.threads``). GitHub failing here costs the review nothing: it
        runs without, and the next one reads the threads again."""
        known = await self._store.read(posted_findings.inline, claim.repo, claim.pr_number)
        if not any(k.state in (posted_findings.OPEN, posted_findings.DECLINED)
                   for k in known):
            return NO_THREADS
        try:
            threads = await review_threads(self._github, installation, claim.repo,
                                           claim.pr_number)
        except (GitHubError, httpx.HTTPError) as exc:
            log.warning("could not read the review threads; reviewing without them: %s",
                        exc, extra=extra)
            return NO_THREADS
        seen = view(threads, known, author=pull.author_login, config=self.settings.triggers,
                    phrases=self.settings.decline_phrases)
        if seen.declined_now:
            await self._store.write(posted_findings.mark, claim.repo, claim.pr_number,
                                    tuple(seen.declined_now), posted_findings.DECLINED)
            log.info("%d finding(s) declined on their threads: %s", len(seen.declined_now),
                     "; ".join(sorted(set(seen.declined_now.values()))), extra=extra)
        return seen

    async def _guidelines(self, bare: BareRepo, base_sha: str, settings: JobSettings
                          ) -> str | None:
        for path in settings.guideline_paths:
            text = await bare.show(base_sha, path)
            if text is not None and text.strip():
                return text
        return None

    async def _engine_mode(self, claim: Claim, extra: dict[str, object]) -> ReviewMode:
        """The rung the reservation was admitted under: REDUCED and above ask the engine
        for correctness and security only."""
        try:
            mode = await anyio.to_thread.run_sync(self._governor.mode_of, claim)
        except LookupError:  # the lease was lost; settling will find that out and say so
            return "full"
        if mode.engine_mode == "reduced":
            log.info("reduced review: the budget is past %s", mode.value, extra=extra)
        return "reduced" if mode.engine_mode == "reduced" else "full"

    def _request(self, claim: Claim, plan: _Plan, workdir: Path, mode: ReviewMode
                 ) -> EngineRequest:
        pull, selection = plan.pull, plan.selection
        return EngineRequest(
            command="describe" if claim.command == "describe" else "review",
            workdir=workdir, diff=selection.diff, changed_paths=selection.paths,
            title=pull.title, body=pull.body, guidelines=plan.guidelines,
            instructions=plan.settings.instructions, language=plan.settings.language,
            declined=plan.threads.declined, earlier=plan.threads.earlier,
            base_sha=pull.base_sha, head_sha=pull.head_sha, reviewed_since=plan.since,
            mode=mode, max_turns=plan.settings.max_turns,
            wall_clock_seconds=plan.settings.wall_clock_seconds,
            max_run_tokens=plan.reserved, log_extra=dict(plan.extra),
        )

    async def _run_engine(self, request: EngineRequest, extra: dict[str, object]
                          ) -> EngineResult:
        """The engine's result (``_engine_result``), counted and timed."""
        started = time.perf_counter()
        result = await self._engine_result(request, extra)
        if self._metrics is not None:
            self._metrics.engine_finished(result.stop_reason, time.perf_counter() - started,
                                          result.usage.tokens or 0)
        return result

    async def _engine_result(self, request: EngineRequest, extra: dict[str, object]
                             ) -> EngineResult:
        """The engine's result; an engine that raises or overstays still yields one.

        ``Engine.run`` is not supposed to raise or to outlive its wall clock. If it does,
        it may have spent anything up to the reservation, so the result says
        ``unavailable`` and the whole reservation stays charged.
        """
        limit = request.wall_clock_seconds + self.settings.engine_grace_seconds
        name = self._engine.name
        try:
            with anyio.move_on_after(limit):
                return await self._engine.run(request)
        except Exception as exc:
            log.exception("the engine raised instead of returning a result", extra=extra)
            return EngineResult(usage=unknown_usage(name, None), stop_reason="engine_error",
                                detail=f"the engine raised {type(exc).__name__}")
        log.error("the engine ran %.0f s past its wall clock; stopped waiting",
                  self.settings.engine_grace_seconds, extra=extra)
        return EngineResult(usage=unknown_usage(name, None), stop_reason="timeout",
                            detail="the engine did not stop at its wall clock")

    async def _publish(self, run: RecordedRun, extra: dict[str, object]) -> None:
        try:
            await self._publisher.publish(run)
        except Exception:
            log.exception("publishing failed; the run stays recorded for a retry", extra=extra)

    # -- endings without an engine --------------------------------------------------------

    async def _supersede(self, claim: Claim, pull: PullRequest, extra: dict[str, object]) -> None:
        """A ``pr_opened`` whose head moved: the reservation settles at zero as ``refused``
        (the worker declined stale work before any engine ran), no run is recorded, and —
        when automatic review would take it — the current head is queued, so a pull
        request pushed to before its first review still gets one."""
        follow_up = None
        if self.settings.auto_review and not pull.draft:
            follow_up = Job(kind="pr_opened", repo=claim.repo, pr_number=claim.pr_number,
                            actor_id=pull.author_id, head_sha=pull.head_sha)
        log.info("superseded: the head moved to %s", pull.head_sha,
                 extra={**extra, "requeued": follow_up is not None})
        await self._store.settle_zero(claim, "refused", enqueue=follow_up,
                                      head_sha=claim.head_sha or pull.head_sha,
                                      check=partial(text.superseded, pull.head_sha))

    async def _nothing_to_review(self, claim: Claim, pull: PullRequest, since: str | None,
                                 selection: Selection, extra: dict[str, object]) -> None:
        """Every change was withheld (or there is none): a completed run with no findings,
        settled at zero, so the publisher can say what was left out."""
        run = RecordedRun(
            claim=claim, head_sha=pull.head_sha, base_sha=pull.base_sha, reviewed_since=since,
            outcome="completed", stop_reason="completed", findings=(), assessment=None,
            description=None, omitted=selection.omitted, usage=NOTHING_SPENT,
            recorded_at=self._clock(), detail="nothing left to review after layer 2",
        )
        if await self._store.commit(run, reviewed_lines=None):
            log.info("nothing to review after exclusions; recorded", extra=extra)
            await self._publish(run, extra)

    def _retry_delay(self, claim: Claim) -> timedelta | None:
        """How long the row waits after this failed attempt (``retry_delays``)."""
        delays = self.settings.retry_delays
        return delays[min(claim.attempts, len(delays)) - 1] if delays else None

    def _report_engine(self, result: EngineResult) -> None:
        if self._health is None:
            return
        if result.stop_reason == "engine_unavailable":
            self._health.engine_unavailable(self._clock(), result.detail)
        else:
            self._health.engine_ran(self._clock())

    async def _give_back(self, claim: Claim, progress: _Progress, *,
                         retry_in: timedelta | None = None,
                         stop_reason: str = "infrastructure") -> None:
        """Settle as ``infrastructure`` and release the row for another attempt, after
        ``retry_in`` (a cancelled job — the process is stopping — goes back at once).

        The charge is honest about what ran: the engine's own usage when it returned, the
        whole reservation (``unavailable``) when it started and no result came back, zero
        when it never started.
        """
        if progress.done:
            return
        if progress.result is not None:
            usage = progress.result.usage
        elif progress.engine_started:
            usage = unknown_usage(self._engine.name, None)
        else:
            usage = NOTHING_SPENT
        if await self._store.give_back(claim, usage, retry_in=retry_in,
                                       stop_reason=stop_reason) is not None:
            progress.done = True


def priced(result: EngineResult) -> Usage:
    """The engine's usage carrying the dollar cost it reported, for the ledger."""
    if result.cost_usd is None or result.usage.cost_usd is not None:
        return result.usage
    return replace(result.usage, cost_usd=result.cost_usd)
