"""The config's schema: the budget's derived limits are the floor of each exact share, and
never above a seventh of the week a day."""

from __future__ import annotations

from fractions import Fraction

import pytest

from service.config.schema import (
    BudgetConfig,
)


def test_derived_limits_are_floored() -> None:
    budget = BudgetConfig(
        enabled=True, session_tokens=88000, weekly_tokens=1500000, max_run_tokens=30000
    )
    assert budget.session_limit == 35200
    assert budget.weekly_limit == 600000
    assert budget.daily_limit == 85714  # 600000 / 7 = 85714.28...


# A sweep rather than hypothesis: every share, every small count, and some large ones.
SWEEP_TOKENS = [*range(1, 800), 88000, 1500000, 10**12 - 1, 10**12 + 3]


@pytest.mark.parametrize("share", range(1, 101))
def test_limits_are_the_floor_of_the_exact_share(share: int) -> None:
    for tokens in SWEEP_TOKENS:
        budget = BudgetConfig(
            enabled=True,
            session_tokens=tokens,
            weekly_tokens=tokens,
            max_run_tokens=1,
            reviewer_share_pct=share,
        )
        exact = Fraction(tokens * share, 100)
        assert budget.session_limit <= exact < budget.session_limit + 1
        assert budget.weekly_limit <= exact < budget.weekly_limit + 1
        # Floored after the share and again after the seventh: never above a seventh.
        assert budget.daily_limit == budget.weekly_limit // 7
        assert budget.daily_limit <= exact / 7 < budget.daily_limit + 1
