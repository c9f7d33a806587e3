"""Routing by size (``engine.models``): which model a pull request goes to, as a pure
choice (``pick``) pinned by properties, the routes the config builds, and the worker
reviewing with the chosen model — a small pull request on the cheap one, a large one on
the larger window instead of in parts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.config.schema import EngineConfig, ModelRoute
from service.engine.openai_compatible import OpenAICompatibleEngine
from service.review.routing import Option, Route, build_routes, pick
from tests.kit.thorough import examples
from tests.worker_helpers import FakeEngine, Sim, worker_sim

__all__ = ["worker_sim"]  # the ``sim`` fixture


def test_the_first_model_that_holds_the_pull_request_whole_reviews_it() -> None:
    cheap = Option(window=16_000, whole=3_000, answer=2_000, max_prompt_tokens=8_000)
    default = Option(window=200_000, whole=3_000, answer=8_000)
    assert pick([cheap, default]) == 0
    # Past the cheap model's bound, the next that holds it.
    assert pick([Option(16_000, 9_000, 2_000, 8_000), Option(200_000, 9_000, 8_000)]) == 1
    # Within the bound but not the window (prompt + answer over it): not that one.
    assert pick([Option(16_000, 7_900, 8_192, 8_000), Option(200_000, 7_900, 8_000)]) == 1
    # An unknown window holds anything within the bound.
    assert pick([Option(None, 7_000, 8_000, 8_000), Option(200_000, 7_000, 8_000)]) == 0


def test_when_none_holds_it_the_largest_unbounded_window_splits_it_least() -> None:
    huge = Option(window=1_000_000, whole=2_000_000, answer=8_000, max_prompt_tokens=500_000)
    big = Option(window=400_000, whole=2_000_000, answer=8_000)
    default = Option(window=200_000, whole=2_000_000, answer=8_000)
    # ``huge`` is bounded (it was listed for pull requests up to 500 000 tokens): not it.
    assert pick([huge, big, default]) == 1
    assert pick([default, Option(200_000, 2_000_000, 8_000)]) == 0  # the earlier of equals


def test_one_model_at_least_has_no_bound() -> None:
    with pytest.raises(ValueError, match="no bound"):
        pick([Option(16_000, 1, 1, max_prompt_tokens=5)])
    with pytest.raises(ValueError):
        pick([])


options = st.builds(Option, window=st.none() | st.integers(1_000, 2_000_000),
                    whole=st.integers(0, 3_000_000), answer=st.integers(0, 10_000),
                    max_prompt_tokens=st.integers(0, 3_000_000) | st.just(0))


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(options, min_size=0, max_size=6), st.integers(0, 6), options)
def test_the_choice_holds_it_or_nothing_did_and_never_breaks_a_bound(
        routes: list[Option], at: int, default: Option) -> None:
    tried = list(routes)
    tried.insert(min(at, len(tried)), Option(default.window, default.whole, default.answer))
    chosen = pick(tried)
    option = tried[chosen]
    if any(o.holds for o in tried):
        assert option.holds and not any(o.holds for o in tried[:chosen])
    else:
        # Never a model listed for smaller pull requests; the largest window of the rest.
        assert not option.bounded
        assert (option.window or 0) == max(o.window or 0 for o in tried if not o.bounded)


def test_the_config_builds_one_engine_per_model_in_the_order_they_are_tried() -> None:
    """The bounded models first, for the small pull requests; the default; then the
    models without a bound, for what the default's window cannot hold whole."""
    config = EngineConfig(kind="openai_compatible", api_url="http://127.0.0.1:4000/v1",
                          model="qwen3-32b", models=(
        ModelRoute(model="gpt-4.1", context_tokens=1_000_000),
        ModelRoute(model="qwen3-8b", max_prompt_tokens=8_000)))
    routes = build_routes(config, {})
    assert [(r.model, r.max_prompt_tokens) for r in routes] == [
        ("qwen3-8b", 8_000), ("qwen3-32b", 0), ("gpt-4.1", 0)]
    assert all(isinstance(r.engine, OpenAICompatibleEngine) for r in routes)
    assert build_routes(EngineConfig(kind="anthropic", model="m"), {})[0].model == "m"
    with pytest.raises(ValueError, match=r"engine\.models\[0\]: .*api_url"):
        build_routes(EngineConfig(kind="openai_compatible", models=(ModelRoute(model="q"),)),
                     {})


@pytest.mark.anyio
async def test_each_model_is_asked_for_its_own_window() -> None:
    config = EngineConfig(kind="anthropic", model="claude-sonnet-4-5", models=(
        ModelRoute(model="claude-haiku-4-5", max_prompt_tokens=20_000),
        ModelRoute(model="house-model", context_tokens=500_000)))
    windows = [(await r.engine.sizing(100_000)).window.tokens
               for r in build_routes(config, {"ANTHROPIC_API_KEY": "k"})]
    assert windows == [200_000, 200_000, 500_000]


def _routes(sim: Sim, cheap: FakeEngine) -> tuple[Route, ...]:
    return (Route(cheap, cheap.model, max_prompt_tokens=1_000),
            Route(sim.engine, sim.engine.model))


@pytest.mark.anyio
async def test_a_small_pull_request_goes_to_the_cheap_model_a_large_one_to_the_default(
        sim: Sim) -> None:
    cheap = FakeEngine(tokens=300, model="cheap-1")
    small = sim.enqueue_opened(sim.open_pr({"src/a.py": "x = 1\n"}))
    await sim.runner(routes=_routes(sim, cheap))(sim.claim())
    assert len(cheap.requests) == 1 and sim.engine.requests == []
    [row] = sim.ledger(small)
    assert (row["model"], row["used_tokens"]) == ("cheap-1", 300)

    large = sim.enqueue_opened(sim.open_pr(
        {"src/big.py": "".join(f"value_{n} = {n}\n" for n in range(600))}))
    await sim.runner(routes=_routes(sim, cheap))(sim.claim())
    assert len(cheap.requests) == 1 and len(sim.engine.requests) == 1
    [row] = sim.ledger(large)
    assert (row["model"], row["used_tokens"]) == ("fake-1", sim.engine.tokens)


@pytest.mark.anyio
async def test_a_pull_request_over_the_default_window_goes_whole_to_a_larger_one(
        sim: Sim) -> None:
    sim.engine.window = 2_500  # the default model would review it in three parts
    wide = FakeEngine(model="wide-1")
    wide.window = 100_000
    files = {f"src/m{i}.py": "".join(f"value_{i}_{n} = {n}\n" for n in range(300))
             for i in range(3)}
    key = sim.enqueue_opened(sim.open_pr(files))
    await sim.runner(routes=(Route(sim.engine, "fake-1"), Route(wide, "wide-1")))(
        sim.claim())
    assert sim.engine.requests == []
    [request] = wide.requests
    assert request.part is None and sorted(request.changed_paths) == sorted(files)
    run = sim.run_row(key)
    assert run is not None and json.loads(run["coverage"])["parts"] == 1
    assert sim.ledger(key)[0]["model"] == "wide-1"
