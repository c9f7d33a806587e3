"""Builders of Claude Code's stream-json lines, and folding them, for the engine's tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from service.engine.stream_json import StreamState

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
