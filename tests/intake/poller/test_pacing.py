"""Pacing an installation's polls by its rate limit: the interval while the budget is
healthy, stretched as it runs low, held until the reset inside the workers' reserve."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.github.ratelimit import RateLimit
from service.intake.poller.pacing import PacingPolicy, estimate_cost, hold_until, next_poll

W = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def limit(remaining: int, reset_in: float, total: int = 5000) -> RateLimit:
    return RateLimit(limit=total, remaining=remaining, used=total - remaining,
                     reset=W + timedelta(seconds=reset_in), resource="core")


INTERVAL = timedelta(seconds=300)
POLICY = PacingPolicy()


def test_a_healthy_budget_polls_at_the_interval() -> None:
    pace = next_poll(limit(4000, 3000), 30, INTERVAL, W, POLICY)
    assert (pace.next_at, pace.reason) == (W + INTERVAL, "interval")
    assert next_poll(None, 30, INTERVAL, W, POLICY).next_at == W + INTERVAL
    assert next_poll(limit(0, -1), 30, INTERVAL, W, POLICY).next_at == W + INTERVAL


def test_a_low_budget_spreads_what_is_left_until_the_reset() -> None:
    # 1,300 left, 1,000 reserved: 300 spendable at 100 a poll = 3 polls in 3,000 s.
    pace = next_poll(limit(1300, 3000), 100, INTERVAL, W, POLICY)
    assert (pace.next_at, pace.reason) == (W + timedelta(seconds=1000), "stretched")


def test_a_budget_inside_the_reserve_waits_for_the_reset() -> None:
    pace = next_poll(limit(1050, 2400), 100, INTERVAL, W, POLICY)
    assert (pace.next_at, pace.reason) == (W + timedelta(seconds=2400), "until_reset")
    assert next_poll(limit(10, 60), 1, INTERVAL, W, POLICY).next_at == W + INTERVAL
    assert hold_until(limit(1050, 2400), 100, W, POLICY) == W + timedelta(seconds=2400)
    assert hold_until(limit(1200, 2400), 100, W, POLICY) is None
    assert hold_until(limit(10, -5), 100, W, POLICY) is None  # the window already reset
    assert hold_until(None, 100, W, POLICY) is None


def test_cost_estimate_and_policy_bounds() -> None:
    assert estimate_cost(None, 0) == 1
    assert estimate_cost(0, 12) == 12
    assert estimate_cost(40, 12) == 40
    with pytest.raises(ValueError):
        PacingPolicy(reserve_fraction=1.0)
    with pytest.raises(ValueError):
        next_poll(None, 1, timedelta(0), W, POLICY)
