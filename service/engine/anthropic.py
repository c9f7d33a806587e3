"""The Anthropic Messages API as an engine (``engine.kind: anthropic``).

One request per review over httpx, no tools for reading the repository: the model sees
the prompt (diff, cleaned title and body, guidelines) and must answer through a forced
tool whose ``input_schema`` is the findings schema (``tool_choice`` names the tool), so
the answer arrives as a JSON object rather than prose. An answer that still fails
validation is sent back once as an ``is_error`` tool result (the repair attempt).

Usage is the response's ``usage`` (input + output + cache creation + cache read):
``exact``. A 200 without ``usage`` is estimated from the text (4 characters a token).
The API key comes from the environment variable named in config and is sent only in
the ``x-api-key`` header; it is never logged. A subscription's OAuth token must not be
used here (see docs/ENGINE.md): this engine is for API keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import anyio
import httpx

from service.budget import Usage
from service.config import Secret
from service.engine.base import EngineRequest, EngineResult, estimate_tokens, no_usage
from service.engine.findings import (
    Answer,
    parse_answer,
    parse_answer_text,
    schema_for,
)
from service.engine.http_api import (
    CallFailed,
    RunUsage,
    Sleep,
    answer_with_one_repair,
    call_failed,
    error_body,
    error_text,
    finish,
    post_json,
    run_guarded,
)
from service.engine.prompt import build_prompt, repair_message, system_rules
from service.engine.stream_json import message_tokens

log = logging.getLogger(__name__)

DEFAULT_API_URL: Final = "https://api.anthropic.com"
API_VERSION: Final = "2023-06-01"
_TRUNCATED_STOPS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})
_SPEND_LIMIT: Final = "enforced_spend_limit_reached"


@dataclass(frozen=True)
class _Reply:
    content: list[Any]
    stop_reason: str | None
    tool_use: dict[str, Any] | None  # the forced tool's block, when the model called it
    text: str


class AnthropicEngine:
    """The Messages API with a forced findings tool. ``transport`` and ``sleep`` are
    seams for tests (httpx.MockTransport, a sleep that does not wait)."""

    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        environ: Mapping[str, str],
        api_key_env: str = "ANTHROPIC_API_KEY",
        api_url: str = DEFAULT_API_URL,
        max_tokens: int = 8192,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = anyio.sleep,
        clock: Callable[[], datetime] | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 60.0,
    ) -> None:
        if not model:
            raise ValueError("engine.model is required for the anthropic engine")
        key = environ.get(api_key_env, "")
        self._key = Secret(key) if key else None
        self._key_env = api_key_env
        self._model = model
        self._url = api_url.rstrip("/") + "/v1/messages"
        self._max_tokens = max_tokens
        self._transport = transport
        self._sleep = sleep
        self._clock = clock or (lambda: datetime.now(UTC))
        self._max_retries = max_retries
        self._max_retry_wait = max_retry_wait

    async def run(self, request: EngineRequest) -> EngineResult:
        """Review or describe ``request``; every outcome is a result."""
        return await run_guarded(self.name, self._model, request, self._run)

    async def _run(self, request: EngineRequest, spend: RunUsage) -> EngineResult:
        if self._key is None:
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="engine_unavailable",
                                detail=f"the API key variable {self._key_env} is not set")
        tool = _tool(request)
        body: dict[str, Any] = {
            "model": self._model,
            "max_tokens": min(self._max_tokens, request.max_run_tokens),
            "system": system_rules(request.command, request.mode, can_read_files=False),
            "messages": [{"role": "user", "content": build_prompt(request)}],
            "tools": [tool],
            "tool_choice": {"type": "tool", "name": tool["name"],
                            "disable_parallel_tool_use": True},
        }
        timeout = httpx.Timeout(request.wall_clock_seconds, connect=10.0)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout) as client:
            return await answer_with_one_repair(
                spend, request, lambda: self._call(client, body, spend, request),
                lambda reply: _answer(request, reply),
                lambda reply, problem: body["messages"].extend(_repair_turn(reply, problem)))

    async def _call(self, client: httpx.AsyncClient, body: dict[str, Any], spend: RunUsage,
                    request: EngineRequest) -> _Reply | EngineResult:
        assert self._key is not None
        headers = {"x-api-key": self._key.reveal(), "anthropic-version": API_VERSION}
        spend.in_flight = True
        response = await post_json(
            client, self._url, headers=headers, body=body, sleep=self._sleep,
            clock=self._clock, max_retries=self._max_retries,
            max_retry_wait=self._max_retry_wait, give_up=_is_spend_limit,
            log_extra=request.log_extra)
        spend.in_flight = False
        if isinstance(response, CallFailed):
            return call_failed(spend, response)
        if response.status_code != 200:
            return finish(spend, *_failure(response))
        try:
            data = response.json()
            if not isinstance(data, dict):
                raise TypeError("not an object")
        except (ValueError, TypeError, RecursionError):
            spend.unknown()  # it answered 200: the call was probably billed
            return finish(spend, "engine_error", "the API answered 200 with a body "
                                                     "that is not a JSON object")
        raw_content = data.get("content")
        content: list[Any] = raw_content if isinstance(raw_content, list) else []
        text = "\n".join(str(b.get("text", "")) for b in content
                         if isinstance(b, dict) and b.get("type") == "text")
        tool_use = next((b for b in content if isinstance(b, dict)
                         and b.get("type") == "tool_use" and isinstance(b.get("input"), dict)),
                        None)
        tokens = message_tokens(data.get("usage"))
        model = data.get("model") if isinstance(data.get("model"), str) else self._model
        if tokens is not None:
            spend.add(Usage(tokens=tokens, confidence="exact", engine=self.name, model=model))
        else:
            sent = json.dumps(body["messages"]) + str(body["system"])
            spend.add(Usage(tokens=estimate_tokens(sent, json.dumps(content)),
                            confidence="estimated", engine=self.name, model=model))
        stop = data.get("stop_reason") if isinstance(data.get("stop_reason"), str) else None
        if stop == "refusal":
            return finish(spend, "refused", "the model refused the request")
        if stop in _TRUNCATED_STOPS:
            return finish(spend, "truncated", f"the answer was cut off ({stop})")
        return _Reply(content=content, stop_reason=stop, tool_use=tool_use, text=text)


def _tool(request: EngineRequest) -> dict[str, Any]:
    name = "submit_review" if request.command == "review" else "submit_description"
    return {"name": name,
            "description": "Submit the final answer. Call this exactly once.",
            "input_schema": schema_for(request.command, request.mode)}


def _answer(request: EngineRequest, reply: _Reply) -> Answer:
    if reply.tool_use is not None:
        return parse_answer(request.command, request.mode, reply.tool_use["input"])
    return parse_answer_text(request.command, request.mode, reply.text)


def _repair_turn(reply: _Reply, problem: str) -> list[dict[str, Any]]:
    """The assistant's reply as sent, then our objection to it."""
    turn: list[dict[str, Any]] = [{"role": "assistant", "content": reply.content}]
    if reply.tool_use is not None and isinstance(reply.tool_use.get("id"), str):
        turn.append({"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": reply.tool_use["id"], "is_error": True,
            "content": repair_message(problem)}]})
    else:
        turn.append({"role": "user", "content": repair_message(problem)})
    return turn


def _is_spend_limit(response: httpx.Response) -> bool:
    if response.status_code != 429:
        return False
    details = error_body(response).get("details")
    code = details.get("error_code") if isinstance(details, dict) else None
    return code == _SPEND_LIMIT or _SPEND_LIMIT in response.text[:2000]


def _failure(response: httpx.Response) -> tuple[str, str]:
    """The stop reason and detail of a non-200 answer (retries already spent)."""
    status, detail = response.status_code, error_text(response)
    message = detail.lower()
    if status in (401, 403, 404):
        return "engine_unavailable", detail
    if status == 413 or (status == 400 and ("prompt is too long" in message
                                            or "context window" in message)):
        return "truncated", detail
    if _is_spend_limit(response):
        return "usage_limit", detail
    return "engine_error", detail
