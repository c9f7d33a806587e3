"""A run's cost record refuses what cannot be true, so the ledger never holds it."""

from __future__ import annotations

import math

import pytest

from service.budget.usage import STOP_REASONS, Usage


def test_a_cost_that_can_be_trusted_and_one_that_cannot() -> None:
    assert Usage(1200, "exact", "claude_code", "sonnet", cost_usd=0.01).tokens == 1200
    assert Usage(None, "unavailable", None, None).tokens is None
    assert Usage(0, "estimated", "anthropic", None, cost_usd=0).cost_usd == 0


@pytest.mark.parametrize(("args", "kwargs", "why"), [
    ((None, "exact", None, None), {}, "may be None only"),
    ((10, "guessed", None, None), {}, "confidence must be one of"),
    ((-1, "exact", None, None), {}, "non-negative integer"),
    ((True, "exact", None, None), {}, "non-negative integer"),
    ((1, "exact", None, None), {"cost_usd": -0.5}, "finite, non-negative"),
    ((1, "exact", None, None), {"cost_usd": math.nan}, "finite, non-negative"),
    ((1, "exact", None, None), {"cost_usd": math.inf}, "finite, non-negative"),
    ((1, "exact", None, None), {"cost_usd": True}, "finite, non-negative"),
])
def test_what_cannot_be_true_is_refused(args: tuple[object, ...], kwargs: dict[str, object],
                                        why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Usage(*args, **kwargs)  # type: ignore[arg-type]


def test_there_are_eleven_stop_reasons_each_once() -> None:
    assert len(STOP_REASONS) == len(set(STOP_REASONS)) == 11
    assert STOP_REASONS[0] == "completed"
