"""The Anthropic Messages API as an engine (``engine.kind: anthropic``).

One request per review over httpx, no tools for reading the repository: the model sees
the prompt (diff, cleaned title and body, guidelines) and must answer through a forced
tool whose ``input_schema`` is the findings schema (``tool_choice`` names the tool), so
the answer arrives as a JSON object rather than prose. An answer that still fails
validation is sent back once as an ``is_error`` tool result (the repair attempt).

Each call is sized first (``sizing``): ``POST /v1/messages/count_tokens`` counts its
input (free of charge; the conservative estimate where a proxy does not serve it), and
``max_tokens`` is what is left of the run and of the model's context window
(``engine.context_tokens``, else the published window: ``windows``) after that input, so
a run never spends more than its reservation and the API never refuses its size. Usage
is the response's ``usage`` (input + output + cache creation + cache read): ``exact``.
A 200 without ``usage`` is estimated from the text. The API key comes from the
environment variable named in config and is sent only in the ``x-api-key`` header; it is
never logged. A subscription's OAuth token must not be
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

from service.budget.usage import Usage
from service.config.redact import Redactor
from service.config.secret import Secret
from service.engine import windows
from service.engine.base import EngineRequest, EngineResult, Sizing, estimate_tokens, no_usage
from service.engine.findings import (
    Answer,
    parse_answer,
    parse_answer_text,
    schema_for,
)
from service.engine.http_api import (
    CallFailed,
    Conversation,
    RequestBudget,
    RunUsage,
    Sleep,
    answer_with_one_repair,
    call_failed,
    capped_answer,
    does_not_fit,
    error_text,
    finish,
    is_quota,
    over_window,
    post_json,
    run_guarded,
)
from service.engine.prompt import (
    PREVIOUS_ANSWER_MAX_CHARS,
    build_prompt,
    repair_message,
    system_rules,
)
from service.engine.sizing import conservative_tokens, fit, with_margin
from service.engine.stream_json import message_tokens

log = logging.getLogger(__name__)

DEFAULT_API_URL: Final = "https://api.anthropic.com"
API_VERSION: Final = "2023-06-01"
_TRUNCATED_STOPS: Final = frozenset({"max_tokens", "model_context_window_exceeded"})


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
        context_tokens: int = 0,
    ) -> None:
        if not model:
            raise ValueError("engine.model is required for the anthropic engine")
        key = environ.get(api_key_env, "")
        self._key = Secret(key) if key else None
        self._key_env = api_key_env
        # What a server echoes of the key never reaches a detail or a log line.
        self._redactor = Redactor(secrets=[key] if key else [])
        self._model = model
        self._url = api_url.rstrip("/") + "/v1/messages"
        self._count_url = self._url + "/count_tokens"
        self._counting = True  # False once the server has shown it has no count_tokens
        self._max_tokens = max_tokens
        self._transport = transport
        self._sleep = sleep
        self._clock = clock or (lambda: datetime.now(UTC))
        self._max_retries = max_retries
        self._max_retry_wait = max_retry_wait
        self._window = (windows.configured(context_tokens) or windows.from_table(model)
                        or windows.UNKNOWN)

    async def run(self, request: EngineRequest) -> EngineResult:
        """Review or describe ``request``; every outcome is a result."""
        return await run_guarded(self.name, self._model, request, self._run)

    async def window(self) -> windows.Window:
        """``engine.context_tokens``, else the model's published window."""
        return self._window

    async def sizing(self, reservation: int) -> Sizing:
        return Sizing(window=self._window, answer_tokens=self._max_tokens)

    async def price(self, request: EngineRequest) -> int:
        """The first call's input as ``_call`` sizes it: ``count_tokens`` (free) with its
        margin, else the conservative estimate."""
        body = _body(self._model, request)
        if self._key is None:
            return conservative_tokens({k: body[k] for k in ("system", "messages", "tools")})
        spend = RunUsage(self.name, self._model)
        async with httpx.AsyncClient(transport=self._transport,
                                     timeout=httpx.Timeout(30.0, connect=10.0)) as client:
            talk = Conversation(client, body, spend, request, anyio.current_time() + 30.0)
            return await self._count(talk, self._headers())

    def _headers(self) -> dict[str, str]:
        assert self._key is not None
        return {"x-api-key": self._key.reveal(), "anthropic-version": API_VERSION}

    async def _run(self, request: EngineRequest, spend: RunUsage) -> EngineResult:
        if self._key is None:
            return EngineResult(usage=no_usage(self.name, self._model),
                                stop_reason="engine_unavailable",
                                detail=f"the API key variable {self._key_env} is not set")
        body = _body(self._model, request)
        timeout = httpx.Timeout(request.wall_clock_seconds, connect=10.0)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout) as client:
            talk = Conversation(client, body, spend, request,
                                anyio.current_time() + request.wall_clock_seconds)
            return await answer_with_one_repair(
                spend, request, lambda problem: self._call(talk, problem),
                lambda reply: _answer(request, reply),
                lambda reply, problem: body["messages"].extend(_repair_turn(reply, problem)))

    async def _count(self, talk: Conversation, headers: dict[str, str]) -> int:
        """The call's input tokens: the server's count with its margin, else the
        conservative estimate (a proxy without ``count_tokens``, an error)."""
        body, request = talk.body, talk.request
        if self._counting:
            response = await post_json(
                talk.client, self._count_url, headers=headers, body=body, sleep=self._sleep,
                clock=self._clock, max_retries=1, max_retry_wait=self._max_retry_wait,
                log_extra=request.log_extra, time_left=talk.time_left,
                budget=RequestBudget(2))
            if not isinstance(response, CallFailed) and response.status_code == 200:
                try:
                    counted = response.json().get("input_tokens")
                except (ValueError, AttributeError, RecursionError):
                    counted = None
                if isinstance(counted, int) and not isinstance(counted, bool):
                    return with_margin(counted)
            if not isinstance(response, CallFailed) and response.status_code in (404, 405):
                self._counting = False
            log.info("count_tokens did not answer (%s); sizing the call with the "
                     "conservative estimate",
                     response.detail if isinstance(response, CallFailed)
                     else f"HTTP {response.status_code}",
                     extra={**request.log_extra, "engine": self.name})
        return conservative_tokens({k: body[k] for k in ("system", "messages", "tools")})

    async def _call(self, talk: Conversation, problem: str | None) -> _Reply | EngineResult:
        headers = self._headers()
        body, spend, request = talk.body, talk.spend, talk.request
        body.pop("max_tokens", None)
        prompt = await self._count(talk, headers)
        fitted = fit(prompt_tokens=prompt, spent=spend.usage.tokens or 0,
                     allowance=request.max_run_tokens, configured_max=self._max_tokens,
                     window=self._window.tokens)
        if fitted.max_tokens is None:
            return does_not_fit(spend, fitted, problem)
        body["max_tokens"] = fitted.max_tokens
        spend.in_flight = True
        response = await post_json(
            talk.client, self._url, headers=headers, body=body, sleep=self._sleep,
            clock=self._clock, max_retries=self._max_retries,
            max_retry_wait=self._max_retry_wait, log_extra=request.log_extra,
            time_left=talk.time_left)
        spend.in_flight = False
        if isinstance(response, CallFailed):
            return call_failed(spend, response)
        if response.status_code != 200:
            failed, detail = _failure(response, self._redactor)
            if failed == "truncated" and problem is None:  # the prompt is over the window
                return over_window(spend, detail)
            return finish(spend, failed, detail)
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


def _body(model: str, request: EngineRequest) -> dict[str, Any]:
    """The request a run starts from (its ``max_tokens`` is set per call)."""
    tool = _tool(request)
    return {
        "model": model,
        "system": system_rules(request.command, request.mode, can_read_files=False),
        "messages": [{"role": "user", "content": build_prompt(request)}],
        "tools": [tool],
        "tool_choice": {"type": "tool", "name": tool["name"],
                        "disable_parallel_tool_use": True},
    }


def _tool(request: EngineRequest) -> dict[str, Any]:
    name = {"review": "submit_review", "describe": "submit_description",
            "ask": "submit_answer"}[request.command]
    return {"name": name,
            "description": "Submit the final answer. Call this exactly once.",
            "input_schema": schema_for(request.command, request.mode)}


def _answer(request: EngineRequest, reply: _Reply) -> Answer:
    if reply.tool_use is not None:
        return parse_answer(request.command, request.mode, reply.tool_use["input"])
    return parse_answer_text(request.command, request.mode, reply.text)


def _repair_turn(reply: _Reply, problem: str) -> list[dict[str, Any]]:
    """The assistant's reply as sent, then our objection to it. A reply too large to
    send back whole goes back as capped text, with a plain objection."""
    sent = json.dumps(reply.content)
    if len(sent) > PREVIOUS_ANSWER_MAX_CHARS:
        return [{"role": "assistant", "content": capped_answer(reply.text or sent)},
                {"role": "user", "content": repair_message(problem)}]
    turn: list[dict[str, Any]] = [{"role": "assistant", "content": reply.content}]
    if reply.tool_use is not None and isinstance(reply.tool_use.get("id"), str):
        turn.append({"role": "user", "content": [{
            "type": "tool_result", "tool_use_id": reply.tool_use["id"], "is_error": True,
            "content": repair_message(problem)}]})
    else:
        turn.append({"role": "user", "content": repair_message(problem)})
    return turn


def _failure(response: httpx.Response, redactor: Redactor) -> tuple[str, str]:
    """The stop reason and detail of a non-200 answer (retries already spent)."""
    status, detail = response.status_code, error_text(response, redactor=redactor)
    message = detail.lower()
    if is_quota(response):  # a spend limit, or "Your credit balance is too low"
        return "usage_limit", detail
    if status in (401, 403, 404):
        return "engine_unavailable", detail
    if status == 413 or (status == 400 and ("prompt is too long" in message
                                            or "context window" in message)):
        return "truncated", detail
    return "engine_error", detail
