"""Folding stream-json events and judging a run (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from service.engine.stream_json import StreamState, classify

NOW = datetime(2026, 3, 25, 23, 30, tzinfo=UTC)


def assistant(msg_id: str, usage: dict[str, int] | None = None, text: str = "",
              **extra: Any) -> str:
    return json.dumps({"type": "assistant", "session_id": "s1", "message": {
        "id": msg_id, "model": extra.pop("model", "claude-sonnet-4-5"), "role": "assistant",
        "type": "message", "stop_reason": extra.pop("stop_reason", "end_turn"),
        "usage": usage or {"input_tokens": 1, "output_tokens": 2},
        "content": [{"type": "text", "text": text}]}, **extra})


def result(**fields: Any) -> str:
    base: dict[str, Any] = {"type": "result", "subtype": "success", "is_error": False,
                            "result": "{}", "num_turns": 2, "session_id": "s1",
                            "total_cost_usd": 0.5,
                            "usage": {"input_tokens": 3, "output_tokens": 4},
                            "modelUsage": {"m": {"inputTokens": 10, "outputTokens": 5,
                                                 "cacheReadInputTokens": 100,
                                                 "cacheCreationInputTokens": 1}}}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def fold(*lines: str) -> StreamState:
    state = StreamState(now=NOW)
    for line in lines:
        state.feed(line)
    return state


def test_usage_is_deduplicated_by_message_id_even_past_the_window() -> None:
    usage = {"input_tokens": 1, "output_tokens": 1, "cache_read_input_tokens": 8}
    lines = [assistant("msg_a", usage)] * 3 + [assistant(f"m{i}", usage) for i in range(600)]
    state = fold(*lines)
    assert state.running_tokens == 601 * 10
    assert state.usage_seen


def test_garbage_and_non_objects_are_counted_not_fatal() -> None:
    state = fold("not json", "[1,2]", '"str"', assistant("m1"), "{")
    assert (state.lines, state.unparsed) == (5, 4)
    assert state.running_tokens == 3


# --- classify ---------------------------------------------------------------------------


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


def test_hostile_lines_never_raise() -> None:
    state = fold("[" * 100_000, b"\xff\xfe{".decode("latin-1"), '{"type": "result", '
                 '"total_cost_usd": NaN, "modelUsage": {"m": {"inputTokens": "9"}}}')
    assert state.unparsed == 2
    assert state.result is not None and state.result.cost_usd is None
    assert state.result.exact_tokens == 0
