"""The engine step of a job: the request built from what the job prepared, the engine run
under a hard ceiling, and its result priced for the ledger.

An engine is not supposed to raise or to outlive its wall clock; when one does, it may have
spent anything up to the reservation, so the result says so (``unknown_usage``) and the
whole reservation stays charged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import anyio

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.engine.base import Engine, EngineRequest, EngineResult, ReviewMode, unknown_usage
from service.github.pulls import PullRequest
from service.observe.metrics.instruments import Metrics
from service.publish.run import Outcome
from service.review.asking import Asked
from service.review.calls import CallPlan
from service.review.diff import FileDiff, Selection
from service.review.guidelines import applying_to, instructions_for
from service.review.repository import RepositoryReview
from service.review.threads import NO_THREADS, ThreadsView
from service.storage.queue import Claim

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """What the preparation found: enough to run the engine."""

    pull: PullRequest
    since: str | None
    selection: Selection
    reserved: int
    guidelines: str | None
    extra: dict[str, object]
    repository: RepositoryReview
    threads: ThreadsView = NO_THREADS
    #: The pull request's diff as GitHub anchors comments to it, when this is that diff.
    anchors: str | None = None
    #: Guideline files of the directories the change touches (``guidelines``).
    directory_guidelines: tuple[tuple[str, str], ...] = ()
    #: The files the engine is given, pruned and split to fit (``calls``); None until
    #: they are planned.
    calls: CallPlan | None = None
    #: The model's engine that runs them (``routing``); None until chosen.
    engine: Engine | None = None
    #: The question of an ``ask``, with what it is about; None for a review or description.
    asked: Asked | None = None


def outcome_for(result: EngineResult, *, partial: bool, read: int,
                review: bool = True) -> Outcome:
    """``runs.outcome`` of a run that ended with ``result`` having read ``read`` files:
    ``truncated`` when something it was to read was not (``partial``) — and, so that no
    later review starts from it, when a review read nothing because nothing fitted;
    ``failed`` when it produced nothing to post (a description or an answer that read
    nothing, ``review`` False, is answered as a failure, saying why)."""
    answered = bool(result.findings or result.assessment or result.description
                    or result.answer)
    if result.stop_reason == "completed":
        return "truncated" if partial else "completed"
    if result.stop_reason == "truncated" and answered:
        return "truncated"
    if read == 0 and result.over_window and review:
        return "truncated"
    return "failed"


def priced(result: EngineResult) -> Usage:
    """The engine's usage carrying the dollar cost it reported, for the ledger."""
    if result.cost_usd is None or result.usage.cost_usd is not None:
        return result.usage
    return replace(result.usage, cost_usd=result.cost_usd)


async def engine_mode(governor: Governor, claim: Claim, extra: dict[str, object]
                      ) -> ReviewMode:
    """The rung the reservation was admitted under: REDUCED and above ask the engine for
    correctness and security only."""
    try:
        mode = await anyio.to_thread.run_sync(governor.mode_of, claim)
    except LookupError:  # the lease was lost; settling will find that out and say so
        return "full"
    if mode.engine_mode == "reduced":
        log.info("reduced review: the budget is past %s", mode.value, extra=extra)
    return "reduced" if mode.engine_mode == "reduced" else "full"


def request(claim: Claim, plan: Plan, workdir: Path, mode: ReviewMode, *,
            files: Sequence[FileDiff] | None, part: str | None, max_turns: int,
            wall_clock_seconds: float, max_run_tokens: int) -> EngineRequest:
    """What one call of the engine is asked, in ``workdir`` (a worktree at the pull
    request's head): ``files``, part ``part`` of the run when it has several.

    ``files=None`` is the call without its diff but with everything any of its files may
    bring (every directory's guidelines, every path's instructions): the fixed cost each
    call is planned against (``calls.plan``)."""
    pull = plan.pull
    paths = tuple(f.path for f in files or ())
    directories, rules = plan.directory_guidelines, plan.repository.path_instructions
    return EngineRequest(
        command=claim.job.command,
        question=None if plan.asked is None else plan.asked.question,
        workdir=workdir, diff="".join(f.text for f in files or ()),
        changed_paths=paths, part=part,
        title=pull.title, body=pull.body, guidelines=plan.guidelines,
        directory_guidelines=(directories if files is None
                              else applying_to(directories, paths)),
        path_instructions=(tuple((r.path, r.instructions) for r in rules) if files is None
                           else instructions_for(rules, paths)),
        instructions=plan.repository.instructions, language=plan.repository.language,
        declined=plan.threads.declined, earlier=plan.threads.earlier,
        base_sha=pull.base_sha, head_sha=pull.head_sha, reviewed_since=plan.since,
        mode=mode, max_turns=max_turns, wall_clock_seconds=wall_clock_seconds,
        max_run_tokens=max_run_tokens, log_extra=dict(plan.extra),
    )


async def run_engine(engine: Engine, request: EngineRequest, *, grace_seconds: float,
                     extra: dict[str, object], metrics: Metrics | None = None
                     ) -> EngineResult:
    """The engine's result, counted and timed; an engine that raises or overstays its wall
    clock by ``grace_seconds`` still yields one."""
    started = time.perf_counter()
    result = await _result(engine, request, grace_seconds, extra)
    if metrics is not None:
        metrics.engine_finished(result.stop_reason, time.perf_counter() - started,
                                result.usage.tokens or 0)
    return result


async def _result(engine: Engine, request: EngineRequest, grace_seconds: float,
                  extra: dict[str, object]) -> EngineResult:
    try:
        with anyio.move_on_after(request.wall_clock_seconds + grace_seconds):
            return await engine.run(request)
    except Exception as exc:
        log.exception("the engine raised instead of returning a result", extra=extra)
        return EngineResult(usage=unknown_usage(engine.name, None), stop_reason="engine_error",
                            detail=f"the engine raised {type(exc).__name__}")
    log.error("the engine ran %.0f s past its wall clock; stopped waiting", grace_seconds,
              extra=extra)
    return EngineResult(usage=unknown_usage(engine.name, None), stop_reason="timeout",
                        detail="the engine did not stop at its wall clock")
