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

The walk reads the store once when it starts (``prepare.read_known``) and writes it only
through ``Settlement``; no transaction is ever held across a GitHub, git or engine call.
What it reads before the engine is ``prepare``'s, the engine step ``engine_call``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Final

import anyio

from service.budget.governor import Governor
from service.config.repository.merge import Effective
from service.config.schema import Config
from service.engine.base import Engine, EngineResult, unknown_usage
from service.github.client import GitHubClient
from service.github.pulls import read_pull
from service.observe.health import Health
from service.observe.metrics.instruments import Metrics
from service.publish import coverage
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.ports import Publisher
from service.publish.run import RecordedRun
from service.publish.run_content import AskAnswer
from service.review import asking, engine_call, fitting, guidelines, parts, prepare
from service.review.checkout import BareRepo, Checkouts
from service.review.diff import read_diff, select
from service.review.endings import Endings
from service.review.engine_call import Plan, outcome_for, priced
from service.review.prepare import Known
from service.review.repository import fingerprinted, for_repository
from service.review.repository_config import RepositoryConfigs
from service.review.routing import Route
from service.review.settle import NOTHING_SPENT, Settlement, log_extra
from service.review.threads import NO_THREADS, fixed_threads
from service.storage.database import Database
from service.storage.queue import Claim
from service.storage.queue_lease import Leasing

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: How long past ``engine.wall_clock_seconds`` the worker waits for an engine that should
#: have stopped itself, before giving up on it as timed out.
ENGINE_GRACE_SECONDS: Final = 60.0
#: How long a row waits after a failed attempt before it can be claimed again: after the
#: first failure, and after every later one. Without a wait, the three attempts of a job
#: that GitHub fails are spent within seconds of an outage, and the request abandoned.
RETRY_DELAYS: Final = (timedelta(minutes=1), timedelta(minutes=4))


@dataclass(frozen=True)
class Tuning:
    """What a job does that no configuration key sets (a test may shorten it)."""

    engine_grace_seconds: float = ENGINE_GRACE_SECONDS
    #: Read from the module at construction, so a test can shorten it.
    retry_delays: tuple[timedelta, ...] = field(default_factory=lambda: RETRY_DELAYS)


@dataclass
class _Progress:
    """How far one attempt got: what the failure path must charge."""

    engine_started: bool = False
    result: EngineResult | None = None
    done: bool = False  # settled (or found lost): the failure path has nothing to do


class JobRunner:
    """Runs one claimed job end to end; ``await runner(claim)`` never raises for the job's
    own failures (it settles, releases and logs them), only for cancellation."""

    def __init__(
        self,
        *,
        store: Database,
        leasing: Leasing,
        governor: Governor,
        github: GitHubClient,
        installations: Callable[[str], Awaitable[int]],
        checkouts: Checkouts,
        engine: Engine,
        publisher: Publisher,
        clock: Clock,
        config: Config,
        tuning: Tuning | None = None,
        health: Health | None = None,
        repo_configs: RepositoryConfigs | None = None,
        metrics: Metrics | None = None,
        routes: Sequence[Route] = (),
    ) -> None:
        """``engine`` is the default model's; ``routes`` (``routing.build_routes``), when
        given, are every model a pull request may be routed to by its size, it last."""
        self.config = config
        self.tuning = tuning or Tuning()
        self._metrics = metrics
        self._repo_configs = repo_configs
        self._db = store
        self._settle = Settlement(store, leasing, governor, clock,
                                  CheckMarks(lambda: self.config.checks))
        self._health = health
        self._governor = governor
        self._github = github
        self._installations = installations
        self._checkouts = checkouts
        self._engine = engine
        self._routes = tuple(routes) or (Route(engine, config.engine.model),)
        self._publisher = publisher
        self._clock = clock
        self._endings = Endings(self._settle, clock, lambda: self.config, self._publish)

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
        known = await self._db.read_async(prepare.read_known, claim, self._engine.name)
        plan = await self._prepare(claim, known, progress, extra)
        if plan is not None:
            await self._review(claim, plan, progress)

    async def _prepare(self, claim: Claim, known: Known, progress: _Progress,
                       extra: dict[str, object]) -> tuple[Plan, BareRepo] | None:
        """Everything before the engine. None when the job ended here."""
        reserved = known.reserved
        if reserved is None:
            progress.done = True
            log.warning("the reservation is no longer open (lease lost); not starting",
                        extra=extra)
            return None
        await self._ack(claim, extra)
        job, config = claim.job, self.config

        installation = await self._installations(job.repo)
        pull = await read_pull(self._github, installation, job.repo, job.pr_number)
        if not pull.open:
            await self._settle.settle_zero(
                claim, "closed", check=partial(text.closed, pull.merged),
                head_sha=job.head_sha or pull.head_sha)
            progress.done = True
            log.info("pull request %s; nothing to review", "merged" if pull.merged else "closed",
                     extra=extra)
            return None
        if job.kind == "pr_opened" and pull.head_sha != job.head_sha:
            await self._endings.supersede(claim, pull, extra)
            progress.done = True
            return None
        repository = Effective() if self._repo_configs is None else (
            await self._repo_configs.for_review(installation, claim.job.repo, extra))
        if job.kind == "pr_opened" and await self._endings.declined(claim, pull, known, repository,
                                                             extra):
            progress.done = True
            return None
        await self._settle.started(claim, pull.head_sha)
        threads = (await prepare.threads(self._github, self._db, installation=installation,
                                         claim=claim, pull=pull, posted=known.posted,
                                         config=config, extra=extra)
                   if job.command == "review" else NO_THREADS)
        asked = None if job.command != "ask" else await asking.read_question(
            self._github, installation, claim, known.posted, config.ask)
        if job.command == "ask" and asked is None:
            log.info("the question's comment is gone; nothing to answer", extra=extra)
            await self._settle.settle_zero(claim, "refused", head_sha=pull.head_sha,
                                           check=lambda _: text.not_posted())
            progress.done = True
            return None

        base_sha = pull.base_sha
        bare, pull = await prepare.checkout(self._github, self._checkouts, repo=job.repo,
                                            pull=pull, installation=installation,
                                            extra=extra)
        since = await prepare.since(claim, pull, bare, known.previous_head, extra)
        files = await read_diff(bare, since or pull.base_sha, pull.head_sha)
        reading = for_repository(config, repository.settings)
        selection = select(files, excluded=reading.excluded_paths,
                           max_lines=config.review.max_diff_lines)
        extra = {**extra, "lines": selection.lines, "reviewed_since": since}
        # The whole pull request against GitHub's own base is the diff GitHub anchors
        # review comments to: the publisher places the findings on it, not on a refetch.
        anchors = ("".join(f.text for f in files)
                   if since is None and pull.base_sha == base_sha else None)
        if not selection.files and asked is None:  # a question is answered all the same
            if selection.truncated:
                log.warning("every file is over review.max_diff_lines; refused", extra=extra)
                sizes = [o.lines for o in selection.omitted if o.reason == "max_diff_lines"]
                await self._settle.settle_zero(
                    claim, "refused", head_sha=pull.head_sha, check=partial(
                        text.refused_size, len(sizes), max(sizes),
                        config.review.max_diff_lines, config.triggers.mention))
            else:
                await self._endings.nothing_to_review(claim, pull, since, selection, extra)
            progress.done = True
            return None

        plan = Plan(pull=pull, since=since, selection=selection, reserved=reserved,
                    guidelines=await guidelines.repository_guidelines(
                        bare, pull.base_sha, reading.guideline_paths),
                    directory_guidelines=await guidelines.directory_guidelines(
                        bare, pull.base_sha, selection.paths),
                    extra=extra, repository=reading, threads=threads, anchors=anchors,
                    asked=asked)
        fitted = await fitting.fit(claim, plan, bare, known, routes=self._routes,
                                   settle=self._settle, endings=self._endings,
                                   mention=config.triggers.mention)
        if fitted is None:
            progress.done = True
            return None
        return fitted, bare

    async def _review(self, claim: Claim, prepared: tuple[Plan, BareRepo],
                      progress: _Progress) -> None:
        """The engine in a fresh worktree, then settle + record + finish, then publish."""
        plan, bare = prepared
        if not await self._settle.renew(claim):
            progress.done = True
            log.warning("lease lost before the engine started; not starting", extra=plan.extra)
            return
        pull, selection, engine = plan.pull, plan.selection, self.config.engine
        planned = plan.calls
        assert planned is not None
        mode = await engine_call.engine_mode(self._governor, claim, plan.extra)
        async with self._checkouts.worktree(bare, pull.head_sha, repo=claim.job.repo) as wd:
            progress.engine_started = True
            ran = await parts.run_parts(
                plan.engine or self._engine, planned,
                lambda i, tokens, seconds: engine_call.request(
                    claim, plan, wd, mode, files=planned.packing.parts[i],
                    part=planned.label(i), max_turns=engine.max_turns,
                    wall_clock_seconds=min(seconds, float(engine.wall_clock_seconds)),
                    max_run_tokens=tokens),
                reserved=plan.reserved, wall_clock_seconds=float(engine.wall_clock_seconds),
                grace_seconds=self.tuning.engine_grace_seconds, extra=plan.extra,
                metrics=self._metrics)
            result = progress.result = ran.result
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
            await self._settle.defer_for_plan(claim, priced(result),
                                              result.usage_limit_resets_at)
            progress.done = True
            return

        omitted = (*selection.omitted, *planned.packing.omitted, *ran.unread)
        run = RecordedRun(
            claim=claim, head_sha=pull.head_sha, base_sha=pull.base_sha,
            reviewed_since=plan.since,
            outcome=outcome_for(result, read=len(ran.read),
                                partial=coverage.partial(omitted),
                                review=claim.job.command == "review"),
            stop_reason=result.stop_reason,
            findings=await fingerprinted(bare, pull, result.findings),
            assessment=result.assessment, description=result.description,
            omitted=omitted, usage=priced(result), recorded_at=self._clock(),
            detail=result.detail, resets_at=result.usage_limit_resets_at,
            fixed=fixed_threads(plan.threads, result), anchors=plan.anchors,
            coverage=replace(planned.packing.coverage(len(selection.omitted)),
                             reviewed=len(ran.read)),
            answer=None if plan.asked is None else AskAnswer(
                question=plan.asked.question.text, text=result.answer,
                reply_to=plan.asked.reply_to),
        )
        # An answer is no review: its lines must not teach the estimator what a review
        # of so many lines costs.
        committed = await self._settle.commit(
            run, reviewed_lines=selection.lines if plan.asked is None else None,
            estimated_tokens=planned.estimate)
        progress.done = True
        if committed:
            log.info("run recorded: %s (%s)", run.outcome, run.stop_reason, extra={
                **plan.extra, "tokens": run.usage.tokens, "confidence": run.usage.confidence,
                "findings": len(run.findings), "cost_usd": result.cost_usd,
                "detail": result.detail, "resets_at": result.usage_limit_resets_at})
            await self._publish(run, plan.extra)

    async def _ack(self, claim: Claim, extra: dict[str, object]) -> None:
        try:
            await self._publisher.ack(claim)
        except Exception as exc:
            log.warning("acknowledgement failed (the job goes on): %s", type(exc).__name__,
                        extra={**extra, "error": str(exc)})

    async def _publish(self, run: RecordedRun, extra: dict[str, object]) -> None:
        try:
            await self._publisher.publish(run)
        except Exception:
            log.exception("publishing failed; the run stays recorded for a retry", extra=extra)

    def _retry_delay(self, claim: Claim) -> timedelta | None:
        """How long the row waits after this failed attempt (``retry_delays``)."""
        delays = self.tuning.retry_delays
        return delays[min(claim.lease.attempt, len(delays)) - 1] if delays else None

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
        if await self._settle.give_back(claim, usage, retry_in=retry_in,
                                        stop_reason=stop_reason) is not None:
            progress.done = True
