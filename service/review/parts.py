"""Running a run's calls, one after another, within its one reservation, and merging
what they found into one result (docs/WORKER.md#sized-to-the-window-pruned-then-split).

Each part gets what is left of the run's tokens, minus what the parts after it were
planned to need (their input and answer room), and what is left of the run's wall clock;
the engine keeps within both, so the run never spends more than it reserved. A part
whose spend cannot be known (the engine could not say) ends the run there: nothing after
it could be bounded. A plan limit, or an engine that cannot start, ends it too. A part
that failed, or did not fit, leaves its files unread, named in the run's ``omitted``.

The merged result: the findings of every completed part (a finding two parts both made
is kept once), one overview (the highest risk; the parts' summaries in order), the
usage of all parts together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import reduce

import anyio

from service.engine.base import (
    RISKS,
    Assessment,
    Description,
    Engine,
    EngineRequest,
    EngineResult,
    Finding,
    combine_usage,
    no_usage,
)
from service.engine.sizing import MIN_ANSWER_TOKENS
from service.observe.metrics.instruments import Metrics
from service.publish.run_content import Omitted
from service.review.calls import CallPlan
from service.review.diff import FileDiff
from service.review.engine_call import run_engine

#: Builds part ``index``'s request with its token allowance and wall clock.
MakeRequest = Callable[[int, int, float], EngineRequest]
#: Seconds a later part needs at least to be worth starting (or a quarter of the run's).
MIN_PART_SECONDS = 5.0


@dataclass(frozen=True)
class Ran:
    """The merged result, the files the engine read, and the files it did not."""

    result: EngineResult
    read: tuple[FileDiff, ...]
    unread: tuple[Omitted, ...]


async def run_parts(engine: Engine, calls: CallPlan, make: MakeRequest, *, reserved: int,
                    wall_clock_seconds: float, grace_seconds: float,
                    extra: dict[str, object], metrics: Metrics | None = None) -> Ran:
    """Run every part of ``calls`` in order (see the module doc)."""
    parts = calls.packing.parts
    deadline = anyio.current_time() + wall_clock_seconds
    results: list[EngineResult] = []
    read: list[FileDiff] = []
    unread: list[Omitted] = []
    spent, stopped = 0, False
    least = min(calls.answer, MIN_ANSWER_TOKENS)
    for index, part in enumerate(parts):
        later = sum(p + calls.answer for p in calls.prices[index + 1:])
        allowance = reserved - spent - later
        seconds = (wall_clock_seconds if index == 0
                   else deadline - anyio.current_time())
        short = allowance < calls.prices[index] + least
        late = index > 0 and seconds < min(MIN_PART_SECONDS, wall_clock_seconds / 4)
        if stopped or short or late:
            why = "max_run_tokens" if short else "not_reviewed"
            unread += [Omitted(f.path, why, f.lines) for f in part]  # type: ignore[arg-type]
            continue
        result = await run_engine(engine, make(index, allowance, seconds),
                                  grace_seconds=grace_seconds, extra=extra, metrics=metrics)
        results.append(result)
        if result.usage.tokens is None:
            stopped = True
        else:
            spent += result.usage.tokens
        if result.stop_reason == "usage_limit" or (
                result.stop_reason == "engine_unavailable" and result.usage.tokens == 0):
            stopped = True
        if result.stop_reason == "completed":
            read += part
        else:
            why = "over_window" if result.over_window else "not_reviewed"
            unread += [Omitted(f.path, why, f.lines) for f in part]  # type: ignore[arg-type]
    return Ran(merge(engine.name, results), tuple(read), tuple(unread))


def merge(engine: str, results: Sequence[EngineResult]) -> EngineResult:
    """One result of several parts' (see the module doc)."""
    if not results:
        return EngineResult(usage=no_usage(engine, None), stop_reason="refused",
                            detail="no part could be started")
    if len(results) == 1:
        return results[0]
    costs = [r.cost_usd for r in results]
    decisive = next((r for r in results if r.stop_reason == "usage_limit"), None)
    done = [r for r in results if r.stop_reason == "completed"]
    base = decisive or (results[0] if not done else EngineResult(
        usage=results[0].usage, stop_reason="completed",
        findings=_unique(f for r in done for f in r.findings),
        assessment=_overview([r.assessment for r in done if r.assessment is not None]),
        description=_description([r.description for r in done
                                  if r.description is not None]),
        fixed=tuple(dict.fromkeys(ref for r in done for ref in r.fixed))))
    return replace(
        base, usage=reduce(combine_usage, (r.usage for r in results)),
        detail="; ".join(r.detail for r in results if r.detail),
        cost_usd=None if None in costs else sum(c for c in costs if c is not None),
        turns=sum(r.turns or 0 for r in results) or None,
        session_id=results[-1].session_id,
        over_window=not done and decisive is None and all(r.over_window for r in results))


def _unique(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    seen: dict[tuple[object, ...], Finding] = {}
    for f in findings:
        key = (f.path, f.line, f.side, " ".join(f.title.lower().split()))
        seen.setdefault(key, f)
    return tuple(seen.values())


def _overview(parts: Sequence[Assessment]) -> Assessment | None:
    if not parts:
        return None
    risk = max((a.risk for a in parts), key=RISKS.index)
    return Assessment(summary="\n\n".join(a.summary for a in parts), risk=risk)


def _description(parts: Sequence[Description]) -> Description | None:
    if not parts:
        return None
    return Description(title=parts[0].title,
                       summary="\n\n".join(d.summary for d in parts),
                       changes=tuple(c for d in parts for c in d.changes))
