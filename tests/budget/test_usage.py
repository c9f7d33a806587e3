"""A run's cost record refuses what cannot be true, so the ledger never holds it."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from service.budget.usage import STOP_REASONS, Usage, settlement_of


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


def test_a_settlement_records_the_usage_and_why_the_run_ended() -> None:
    resets = datetime(2026, 3, 25, 14, 0, tzinfo=UTC)
    usage = Usage(1200, "exact", "claude_code", "sonnet", cost_usd=0.01)
    settlement = settlement_of(usage, stop_reason="usage_limit", reviewed_lines=40,
                               reviewed_since="abc", resets_at=resets)
    assert (settlement.tokens, settlement.confidence, settlement.engine, settlement.model,
            settlement.stop_reason, settlement.reviewed_lines, settlement.reviewed_since,
            settlement.cost_usd) == (1200, "exact", "claude_code", "sonnet", "usage_limit",
                                     40, "abc", 0.01)


@pytest.mark.parametrize(("stop_reason", "resets_at", "why"), [
    ("finished", None, "stop_reason must be one of"),
    ("completed", datetime(2026, 3, 25, tzinfo=UTC), "only meaningful with stop_reason"),
    ("usage_limit", datetime(2026, 3, 25), "must be timezone-aware"),
])
def test_a_settlement_that_cannot_be_true_is_refused(
        stop_reason: str, resets_at: datetime | None, why: str) -> None:
    usage = Usage(1, "exact", None, None)
    with pytest.raises(ValueError, match=why):
        settlement_of(usage, stop_reason=stop_reason, reviewed_lines=None,
                      reviewed_since=None, resets_at=resets_at)
