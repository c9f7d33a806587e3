"""Judging a run from its folded stream (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from service.engine.stream_verdict import classify
from tests.engine.stream_events import assistant, fold, result


def test_exact_usage_sums_model_usage_over_models() -> None:
    state = fold(assistant("m1"), result(modelUsage={
        "opus": {"inputTokens": 2, "outputTokens": 964, "cacheReadInputTokens": 18774,
                 "cacheCreationInputTokens": 4380},
        "haiku": {"inputTokens": 50, "outputTokens": 10}}))
    outcome = classify(state, exit_code=0, aborted=None)
    assert (outcome.stop_reason, outcome.tokens, outcome.confidence) == (
        "completed", 24180, "exact")
    assert outcome.model == "opus"
    assert outcome.cost_usd == 0.5 and outcome.answer == "{}"


def test_result_without_model_usage_is_estimated() -> None:
    state = fold(assistant("m1", {"input_tokens": 100, "output_tokens": 50}),
                 result(modelUsage=None))
    outcome = classify(state, exit_code=0, aborted=None)
    assert (outcome.tokens, outcome.confidence) == (150, "estimated")


@pytest.mark.parametrize(("lines", "aborted", "expected"), [
    # Auth failure beats everything else.
    ([assistant("x", text="Invalid API key · Please run /login", error="authentication_failed",
                model="<synthetic>")], "timeout", "engine_unavailable"),
    # A plan limit beats the wall clock that ended a run waiting on it.
    ([json.dumps({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected"}})],
     "timeout", "usage_limit"),
    ([json.dumps({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}})],
     "timeout", "timeout"),
    ([assistant("m1")], "tokens", "truncated"),
    ([result(subtype="error_max_budget_usd", is_error=True)], None, "truncated"),
    ([result(is_error=True, result="Prompt is too long", modelUsage={})], None, "truncated"),
    ([result(stop_reason="max_tokens")], None, "truncated"),
    ([result(subtype="error_during_execution", is_error=True, errors=["boom"])], None,
     "failed"),
    ([result(subtype="error_max_structured_output_retries", is_error=True)], None, "failed"),
    ([assistant("m1", stop_reason="refusal"), result()], None, "refused"),
    ([result(is_error=True, api_error_status=529,
             result="API Error: 529 Overloaded. This is a server-side issue")], None,
     "engine_error"),
    ([result(is_error=True, api_error_status=401, result="API Error: 401")], None,
     "engine_unavailable"),
    ([assistant("m1")], None, "engine_error"),
    ([], None, "engine_error"),
])
def test_stop_reason_precedence(lines: list[str], aborted: Any, expected: str) -> None:
    outcome = classify(fold(*lines), exit_code=1, aborted=aborted)
    assert outcome.stop_reason == expected, outcome.detail
    assert outcome.answer is None
    assert len(outcome.detail) > 0


def test_no_output_detail_quotes_stderr_without_secrets() -> None:
    outcome = classify(fold(), exit_code=1, aborted=None,
                       stderr_tail="Error: bad key sk-ant-api03-SECRETSECRET\nmore")
    assert outcome.stop_reason == "engine_error"
    assert "printed nothing" in outcome.detail and "SECRETSECRET" not in outcome.detail
    assert (outcome.tokens, outcome.confidence) == (None, "unavailable")


def test_limit_reset_prefers_the_structured_event() -> None:
    state = fold(
        json.dumps({"type": "rate_limit_event", "rate_limit_info": {
            "status": "rejected", "resetsAt": 1774447200, "rateLimitType": "five_hour"}}),
        assistant("x", text="You've hit your limit · resets 2am (Europe/Berlin)",
                  model="<synthetic>", error="rate_limit", api_error_status=429),
        result(is_error=True, api_error_status=429,
               result="You've hit your limit · resets 2am (Europe/Berlin)", modelUsage={}))
    outcome = classify(state, exit_code=1, aborted=None)
    assert outcome.stop_reason == "usage_limit"
    assert outcome.resets_at == datetime(2026, 3, 25, 14, 0, tzinfo=UTC)
    assert "five_hour" in outcome.detail
    assert (outcome.tokens, outcome.confidence) == (0, "exact")
