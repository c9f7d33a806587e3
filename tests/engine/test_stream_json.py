"""Folding stream-json events (pure)."""

from __future__ import annotations

from tests.engine.stream_events import assistant, fold


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


def test_hostile_lines_never_raise() -> None:
    state = fold("[" * 100_000, b"\xff\xfe{".decode("latin-1"), '{"type": "result", '
                 '"total_cost_usd": NaN, "modelUsage": {"m": {"inputTokens": "9"}}}')
    assert state.unparsed == 2
    assert state.result is not None and state.result.cost_usd is None
    assert state.result.exact_tokens == 0
