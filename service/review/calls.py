"""A run's calls, planned before it starts: the diff fitted to the model's window and the
run's reservation (``packing``), each call priced as the engine will count it, and the
pre-flight estimate that follows (docs/WORKER.md#sized-to-the-window-pruned-then-split).

The HTTP engines are priced from the prompt they will send: the estimate is each call's
measured input plus the answer it leaves room for, so a run that fits is never refused
on a guess. Claude Code's cost is not its prompt (it reads files and takes turns, and
every turn re-reads the conversation): once its ledger has enough runs, the rate fitted
on them (``estimate``) prices it, never below what its first calls alone cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.engine.base import Engine, EngineRequest
from service.review.diff import FileDiff
from service.review.estimate import Estimator
from service.review.packing import Limits, Packing, answer_room, pack
from service.review.pruning import Attributes

#: Builds the request of one call: its files, and its label when the run has parts
#: ("part 2 of 3"). Files ``None``: no diff, but all that any file may bring with it
#: (its directory's guidelines, its path's instructions), what every call is planned
#: against.
RequestFor = Callable[[Sequence[FileDiff] | None, str | None], EngineRequest]


@dataclass(frozen=True)
class CallPlan:
    """The calls of one run: the packing, each part's input as the engine counts it, the
    answer room each keeps, and the run's estimate."""

    packing: Packing
    prices: tuple[int, ...]
    answer: int
    estimate: int
    fitted: bool = False  # the estimate is the ledger's fitted rate (Claude Code)

    def label(self, index: int) -> str | None:
        """What the prompt calls part ``index`` (None for a run of one call)."""
        return part_label(index, len(self.packing.parts))


def part_label(index: int, count: int) -> str | None:
    """``part 2 of 3``; None for a run of one call."""
    return None if count < 2 else f"part {index + 1} of {count}"


async def plan(engine: Engine, files: Sequence[FileDiff], request_for: RequestFor, *,
               reserved: int, attributes: Attributes, estimator: Estimator,
               lines: int) -> CallPlan:
    """Fit ``files`` to ``engine``'s window and the run's ``reserved`` tokens, and price
    the calls that result (``lines``: the diff lines layer 2 kept, for a fitted rate)."""
    sizing = await engine.sizing(reserved)
    window = sizing.window.tokens
    answer = answer_room(sizing.answer_tokens, window)
    # The most a call costs beside its files, so that every part planned fits.
    fixed = await engine.price(request_for(None, part_label(0, 2)))
    limits = Limits(window=window, reservation=reserved, fixed=fixed, answer=answer,
                    bytes_per_token=sizing.bytes_per_token)
    packing = pack(files, limits, attributes)
    count = len(packing.parts)
    prices = tuple([await engine.price(request_for(part, part_label(i, count)))
                    for i, part in enumerate(packing.parts)])
    estimate = sum(prices) + answer * count
    if not count and files:  # nothing fits: the cheapest call there could have been
        estimate = fixed + answer + min(limits.tokens(f) for f in files)
    # Claude Code (its overhead is the tell: a run is more than its prompt) is priced by
    # its history once there is enough of it.
    if sizing.overhead_tokens and estimator.fitted:
        return CallPlan(packing, prices, answer, max(estimate, estimator.tokens(lines)),
                        fitted=True)
    return CallPlan(packing, prices, answer, estimate)
