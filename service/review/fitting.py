"""A run's calls fitted before it starts: the model chosen by the pull request's size
(``routing``), the diff fitted to its window and the reservation and priced (``calls``),
cut to one call for an answer (``asking.one_call``); or the run ended here, saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from functools import partial

from service.engine.base import EngineRequest
from service.publish.checks import text
from service.review import asking, calls, engine_call, routing
from service.review.checkout import BareRepo
from service.review.diff import FileDiff
from service.review.endings import Endings
from service.review.engine_call import Plan
from service.review.prepare import Known
from service.review.pruning import read_attributes
from service.review.routing import Route
from service.review.settle import Settlement
from service.storage.queue import Claim

log = logging.getLogger(__name__)


async def fit(claim: Claim, plan: Plan, bare: BareRepo, known: Known, *,
              routes: Sequence[Route], settle: Settlement, endings: Endings,
              mention: str) -> Plan | None:
    """``plan`` with its calls and engine. None when the run ended here: its estimate is
    over its reservation (refused), or no file fits any call (recorded as reading
    nothing, each file named with why). A question is never refused silently: it is
    recorded as unanswered, so the person who asked is told why."""
    attributes = read_attributes(await bare.show(plan.pull.base_sha, ".gitattributes"))

    def request_for(files: Sequence[FileDiff] | None, part: str | None) -> EngineRequest:
        return engine_call.request(claim, plan, bare.path, "full", files=files, part=part,
                                   max_turns=1, wall_clock_seconds=1.0,
                                   max_run_tokens=plan.reserved)

    route = await routing.choose(routes, request_for(plan.selection.files, None),
                                 plan.reserved)
    planned = await calls.plan(
        route.engine, plan.selection.files, request_for, reserved=plan.reserved,
        attributes=attributes, estimator=known.estimator, lines=plan.selection.lines)
    if plan.asked is not None:
        planned = asking.one_call(planned)
    extra = {**plan.extra, "estimate": planned.estimate,
             "parts": len(planned.packing.parts),
             **({"model": route.model} if len(routes) > 1 else {})}
    unread = planned.packing.omitted
    over = planned.estimate > plan.reserved or (
        not planned.packing.parts and any(o.reason == "max_run_tokens" for o in unread))
    if over and plan.asked is None:
        log.warning("pre-flight estimate %d tokens exceeds the run's %d; refused",
                    planned.estimate, plan.reserved,
                    extra={**extra, "fitted": known.estimator.samples})
        await settle.settle_zero(
            claim, "refused", head_sha=plan.pull.head_sha, check=partial(
                text.refused_estimate, planned.estimate, plan.reserved,
                plan.selection.lines, mention))
        return None
    if over or not planned.packing.parts:
        log.warning("no file fits a call of the model's window; nothing read",
                    extra=extra)
        await endings.nothing_read(claim, plan, planned)
        return None
    return replace(plan, calls=planned, engine=route.engine, extra=extra)
