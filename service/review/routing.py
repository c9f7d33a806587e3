"""Which model reviews a pull request, by its size (``engine.models``).

An operator may give the engine several models: a cheap one for small pull requests, one
with a large window for those the default model would have to split
(docs/ENGINE.md#routing-by-size). Each is the same engine with another ``model`` (and
window), built once at start, and tried in this order: the models with a
``max_prompt_tokens`` bound (in the config's order), then the default (``engine.model``),
then the models without a bound. Before a run is planned, the whole pull request, as one
call, is priced by each model the way that model counts it; ``pick`` takes the first that
holds it whole (within its window and its bound), and when none does, the unbounded one
with the largest window, so that it is split into the fewest parts.

``pick`` is pure; ``choose`` asks the engines. The run is then planned, priced and
admitted against its reservation with the chosen engine as it would be with one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.config.schema import EngineConfig
from service.engine.base import Engine, EngineRequest
from service.engine.factory import build_engine
from service.review.packing import answer_room

__all__ = ["Option", "Route", "build_routes", "choose", "pick"]


@dataclass(frozen=True)
class Route:
    """One model the engine may run: ``max_prompt_tokens`` 0 is no bound."""

    engine: Engine
    model: str | None
    max_prompt_tokens: int = 0


def build_routes(config: EngineConfig, environ: Mapping[str, str], **options: Any
                 ) -> tuple[Route, ...]:
    """One engine per model, in the order they are tried (see the module doc), each
    built as ``build_engine`` builds the one (``options`` passed on). Raises
    ``ValueError`` as it does, naming the entry."""
    built = []
    for index, entry in enumerate(config.models):
        one = dataclasses.replace(config, model=entry.model,
                                  context_tokens=entry.context_tokens, models=())
        try:
            engine = build_engine(one, environ, **options)
        except ValueError as exc:
            raise ValueError(f"engine.models[{index}]: {exc}") from None
        built.append(Route(engine, entry.model, entry.max_prompt_tokens))
    default = Route(build_engine(dataclasses.replace(config, models=()), environ, **options),
                    config.model)
    return (*(r for r in built if r.max_prompt_tokens), default,
            *(r for r in built if not r.max_prompt_tokens))


@dataclass(frozen=True)
class Option:
    """What one model makes of a pull request: its window (None: unknown), the whole
    pull request's prompt as it counts it, the answer room a call keeps, its bound."""

    window: int | None
    whole: int
    answer: int
    max_prompt_tokens: int = 0

    @property
    def bounded(self) -> bool:
        return self.max_prompt_tokens > 0

    @property
    def holds(self) -> bool:
        """The whole pull request goes to this model in one call."""
        fits = self.window is None or self.whole + self.answer <= self.window
        return fits and (not self.bounded or self.whole <= self.max_prompt_tokens)


def pick(options: Sequence[Option]) -> int:
    """The index of the model that reviews: the first that holds the pull request
    whole; else, of those with no bound, the largest window (the earliest of equals).
    One option at least has no bound (the default model)."""
    unbounded = [i for i, o in enumerate(options) if not o.bounded]
    if not unbounded:
        raise ValueError("one option at least (the default model) has no bound")
    for index, option in enumerate(options):
        if option.holds:
            return index
    return max(unbounded, key=lambda i: (options[i].window or 0, -i))


async def choose(routes: Sequence[Route], whole: EngineRequest, reserved: int) -> Route:
    """The route ``pick`` takes for the pull request ``whole`` asks of one call."""
    if len(routes) == 1:
        return routes[0]
    options = []
    for route in routes:
        sizing = await route.engine.sizing(reserved)
        window = sizing.window.tokens
        options.append(Option(window=window, whole=await route.engine.price(whole),
                              answer=answer_room(sizing.answer_tokens, window),
                              max_prompt_tokens=route.max_prompt_tokens))
    return routes[pick(options)]
