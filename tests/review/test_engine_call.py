"""The engine step's pure parts: a run's outcome from the engine's stop reason."""

from __future__ import annotations

from datetime import UTC, datetime

from service.budget.usage import Usage
from service.engine.base import Assessment, EngineResult
from service.review.engine_call import outcome_for

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



def test_outcomes() -> None:
    def ended(stop: str, *, answered: bool = False, over: bool = False) -> EngineResult:
        return EngineResult(usage=Usage(tokens=0, confidence="exact", engine="fake",
                                                  model=None), stop_reason=stop,
                            assessment=Assessment("ok", "low") if answered else None,
                            over_window=over)

    assert outcome_for(ended("completed", answered=True), partial=False, read=3) == "completed"
    assert outcome_for(ended("completed", answered=True), partial=True, read=2) == "truncated"
    # Stopped at the token cap with an answer: partial; with none, nothing to post.
    assert outcome_for(ended("truncated", answered=True), partial=False, read=1) == "truncated"
    assert outcome_for(ended("truncated"), partial=False, read=1) == "failed"
    # Nothing fitted the window: read nothing, and no later review may start from it.
    assert outcome_for(ended("refused", over=True), partial=True, read=0) == "truncated"
    for reason in ("timeout", "engine_error", "engine_unavailable", "usage_limit", "failed",
                   "refused"):
        assert outcome_for(ended(reason), partial=False, read=1) == "failed"
