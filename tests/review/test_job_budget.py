"""The worker honours the budget's second layer: the REDUCED rung, dollars, the breaker."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from service.engine.base import EngineRequest, EngineResult
from service.storage.times import to_db_time
from tests.worker_helpers import Sim, worker_sim

__all__ = ["worker_sim"]  # the ``sim`` fixture



def spend(sim: Sim, tokens: int) -> None:
    at = to_db_time(sim.now() - timedelta(hours=1))
    with sim.store.transaction() as conn:
        conn.execute(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
            " used_tokens, usage_confidence, reserved_at, settled_at, stop_reason)"
            " VALUES ('mention:o/x:1:1', 'old', 1, 'full', ?, ?, 'exact', ?, ?, 'completed')",
            (tokens, tokens, at, at))


def ledger_row(sim: Sim, key: str) -> dict[str, object]:
    [row] = sim.ledger(key)
    return row


@pytest.mark.anyio
async def test_past_60_percent_the_engine_is_asked_for_a_reduced_review(sim: Sim) -> None:
    spend(sim, 600_000)  # 60 % of the session window (budget() is 1,000,000 at 100 %)
    pr = sim.open_pr({"src/app.py": "changed\n"})
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    [request] = sim.engine.requests
    assert request.mode == "reduced"
    assert ledger_row(sim, key)["mode"] == "reduced"


@pytest.mark.anyio
async def test_below_60_percent_the_review_is_full(sim: Sim) -> None:
    spend(sim, 599_999)
    key = sim.enqueue_opened(sim.open_pr({"src/app.py": "changed\n"}))
    await sim.runner()(sim.claim())
    assert sim.engine.requests[0].mode == "full"
    assert ledger_row(sim, key)["mode"] == "full"


@pytest.mark.anyio
async def test_the_reported_dollar_cost_reaches_the_ledger(sim: Sim) -> None:
    def costly(request: EngineRequest) -> EngineResult:
        return replace(sim.engine.completed(request), cost_usd=0.4321)

    sim.engine.answer = costly
    key = sim.enqueue_opened(sim.open_pr({"src/app.py": "changed\n"}))
    await sim.runner()(sim.claim())
    assert ledger_row(sim, key)["cost_usd"] == pytest.approx(0.4321)


@pytest.mark.anyio
async def test_a_plan_limit_trips_the_breaker_until_the_reported_reset(sim: Sim) -> None:
    resets = sim.now() + timedelta(hours=2)

    def limited(request: EngineRequest) -> EngineResult:
        return EngineResult(usage=sim.engine.usage(), stop_reason="usage_limit",
                            usage_limit_resets_at=resets, detail="plan limit reached")

    sim.engine.answer = limited
    key = sim.enqueue_opened(sim.open_pr({"src/app.py": "changed\n"}))
    await sim.runner()(sim.claim())
    assert ledger_row(sim, key)["stop_reason"] == "usage_limit"
    snap = sim.governor.snapshot(sim.now()).as_json()
    breaker = snap["breaker"]
    assert isinstance(breaker, dict) and breaker["tripped"] is True
    assert breaker["tripped_until"] == resets.isoformat()
    # While tripped nothing is admitted, a mention included.
    pr2 = sim.open_pr({"src/other.py": "y\n"})
    sim.enqueue_mention(pr2)
    assert sim.queue.claim(now=sim.now(), owner="w", admit=sim.governor.admit) is None
    refusal = sim.governor.last_refusal
    assert refusal is not None and refusal.reason == "breaker"
