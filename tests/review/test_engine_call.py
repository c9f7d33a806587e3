"""The engine step's pure parts: a run's outcome from the engine's stop reason."""

from __future__ import annotations

from datetime import UTC, datetime

from service.review.engine_call import outcome_for

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



def test_outcomes() -> None:
    assert outcome_for("completed", False) == "completed"
    assert outcome_for("completed", True) == "truncated"
    assert outcome_for("truncated", False) == "truncated"
    for reason in ("timeout", "engine_error", "engine_unavailable", "usage_limit", "failed"):
        assert outcome_for(reason, False) == "failed"
