"""An OpenAI-compatible chat-completions server as an engine (Ollama, llama.cpp, vLLM).

One non-streaming ``POST {api_url}/chat/completions`` per review, the rules as the
system message and the prompt as the user message, asking for JSON through
``response_format`` (``json_object`` by default, ``json_schema`` with the findings schema
when configured, or none). A server that refuses a field with a 400/422 is asked again
without it — ``max_tokens`` becomes ``max_completion_tokens`` and ``temperature`` goes
when the error names them (OpenAI's reasoning models), else ``response_format`` goes —
within the call's request budget, and the engine remembers it for later runs.

No server here counts tokens before a call, so each is sized with the conservative
estimate (``sizing``: 2 bytes a token) and given ``max_tokens`` = what is left of the run
and of the model's context window: ``engine.context_tokens``, else what the server says
(``window_discovery``, asked once), else the published window of the model's name.

Usage: ``prompt_tokens + completion_tokens`` from the response is ``exact``. Local
servers do not always count: a missing ``usage``, or ``prompt_tokens`` of 0 for a
non-empty prompt (Ollama reports 0 when the prompt came from its cache), is replaced by
an ``estimated`` figure: one token per 4 characters of what was sent (system + user
messages) and of what came back, with a reported ``completion_tokens`` kept as is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal

import anyio
import httpx

from service.budget.usage import Usage
from service.config.redact import Redactor
from service.config.secret import Secret
from service.engine import windows
from service.engine.base import EngineRequest, EngineResult, Sizing, estimate_tokens
from service.engine.findings import parse_answer_text, schema_for
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
    error_info,
    error_text,
    finish,
    is_quota,
    over_window,
    post_json,
    run_guarded,
)
from service.engine.prompt import build_prompt, repair_message, system_rules
from service.engine.sizing import conservative_tokens, fit
from service.engine.window_discovery import discover
from service.engine.windows import Window

log = logging.getLogger(__name__)

ResponseFormat = Literal["json_object", "json_schema", "none"]
RESPONSE_FORMATS: Final = ("json_object", "json_schema", "none")
_CONTEXT_MARKERS: Final = ("context length", "context window", "maximum context",
                           "too many tokens", "prompt is too long", "exceeds the context",
                           "exceeds the available context size", "exceed_context_size")


class OpenAICompatibleEngine:
    """Chat completions against ``api_url`` (e.g. ``http://localhost:11434/v1``)."""

    name = "openai_compatible"

    def __init__(
        self,
        *,
        model: str,
        api_url: str,
        environ: Mapping[str, str],
        api_key_env: str | None = None,
        max_tokens: int = 8192,
        response_format: ResponseFormat = "json_object",
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = anyio.sleep,
        clock: Callable[[], datetime] | None = None,
        max_retries: int = 2,
        max_retry_wait: float = 60.0,
        context_tokens: int = 0,
    ) -> None:
        if not model:
            raise ValueError("engine.model is required for the openai_compatible engine")
        if not api_url.startswith(("http://", "https://")):
            raise ValueError("engine.api_url must be an http(s) URL for openai_compatible")
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"engine.response_format must be one of {RESPONSE_FORMATS}")
        key = environ.get(api_key_env, "") if api_key_env else ""
        self._key = Secret(key) if key else None
        # What a server echoes of the key never reaches a detail or a log line.
        self._redactor = Redactor(secrets=[key] if key else [])
        #: Request fields this server has refused (``max_tokens``, ``temperature``,
        #: ``response_format``): later requests are sent without them.
        self._refused: set[str] = set()
        self._model = model
        self._url = api_url.rstrip("/") + "/chat/completions"
        self._max_tokens = max_tokens
        self._format = response_format
        self._transport = transport
        self._sleep = sleep
        self._clock = clock or (lambda: datetime.now(UTC))
        self._max_retries = max_retries
        self._max_retry_wait = max_retry_wait
        self._api_url = api_url
        #: The model's window once known (configured, or the server answered).
        self._window: Window | None = windows.configured(context_tokens)

    async def run(self, request: EngineRequest) -> EngineResult:
        """Review or describe ``request``; every outcome is a result."""
        return await run_guarded(self.name, self._model, request, self._run)

    async def window(self) -> Window:
        """The model's context window (see the module doc); asked of the server once."""
        if self._window is not None:
            return self._window
        found, answered = await discover(self._api_url, self._model, headers=self._auth(),
                                         transport=self._transport)
        window = found or windows.from_table(self._model) or windows.UNKNOWN
        if answered:  # a server that did not answer is asked again next run
            self._window = window
        log.info("the model's context window: %s", window.describe(),
                 extra={"engine": self.name, "model": self._model})
        return window

    async def sizing(self, reservation: int) -> Sizing:
        return Sizing(window=await self.window(), answer_tokens=self._max_tokens)

    async def price(self, request: EngineRequest) -> int:
        """The first call's input as ``_call`` sizes it (the conservative count)."""
        return _prompt_tokens(self._body(request))

    def _auth(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._key.reveal()}"} if self._key else {}

    def _body(self, request: EngineRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": system_rules(request.command, request.mode,
                                                           can_read_files=False)},
                {"role": "user", "content": build_prompt(request)},
            ],
            "stream": False,
        }
        if "temperature" not in self._refused:
            body["temperature"] = 0
        if self._format == "json_object" and "response_format" not in self._refused:
            body["response_format"] = {"type": "json_object"}
        elif self._format == "json_schema" and "response_format" not in self._refused:
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.command, "schema": schema_for(request.command, request.mode)}}
        return body

    async def _run(self, request: EngineRequest, spend: RunUsage) -> EngineResult:
        body = self._body(request)
        window = (await self.window()).tokens
        timeout = httpx.Timeout(request.wall_clock_seconds, connect=10.0)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout) as client:
            talk = Conversation(client, body, spend, request,
                                anyio.current_time() + request.wall_clock_seconds)
            return await answer_with_one_repair(
                spend, request, lambda problem: self._call(talk, problem, window),
                lambda reply: parse_answer_text(request.command, request.mode, reply),
                lambda reply, problem: body["messages"].extend([
                    {"role": "assistant", "content": capped_answer(reply)},
                    {"role": "user", "content": repair_message(problem)}]))

    @property
    def _max_key(self) -> str:
        # OpenAI's reasoning models refuse max_tokens; once one said so, ask the new way.
        return "max_completion_tokens" if "max_tokens" in self._refused else "max_tokens"

    async def _call(self, talk: Conversation, problem: str | None,
                    window: int | None) -> str | EngineResult:
        """One completion; its text, or the run's result when it failed or would not fit."""
        body, spend, request = talk.body, talk.spend, talk.request
        headers = self._auth()
        for key in ("max_tokens", "max_completion_tokens"):
            body.pop(key, None)
        fitted = fit(prompt_tokens=_prompt_tokens(body), spent=spend.usage.tokens or 0,
                     allowance=request.max_run_tokens, configured_max=self._max_tokens,
                     window=window)
        if fitted.max_tokens is None:
            return does_not_fit(spend, fitted, problem)
        body[self._max_key] = fitted.max_tokens
        budget = RequestBudget()
        spend.in_flight = True
        while True:
            response = await post_json(
                talk.client, self._url, headers=headers, body=body, sleep=self._sleep,
                clock=self._clock, max_retries=self._max_retries,
                max_retry_wait=self._max_retry_wait, give_up=_context_overflow,
                log_extra=request.log_extra, time_left=talk.time_left, budget=budget)
            if (isinstance(response, CallFailed) or response.status_code not in (400, 422)
                    or budget.left == 0):
                break
            change = self._adjust(body, response)
            if change is None:
                break
            log.info("the server refused %s; asking again without it", change,
                     extra={**request.log_extra, "engine": self.name})
        spend.in_flight = False
        if isinstance(response, CallFailed):
            return call_failed(spend, response)
        if response.status_code != 200:
            if _context_overflow(response) and problem is None:
                return over_window(spend, error_text(response, redactor=self._redactor))
            return finish(spend, *_failure(response, self._redactor))
        try:
            data = response.json()
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not text")
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
            spend.unknown()
            return finish(spend, "engine_error",
                              "the server answered 200 without a readable completion")
        spend.add(self._usage(data, body, content))
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip() and not content.strip():
            # Structured Outputs' refusal: no answer will come, and a repair would be paid.
            return finish(spend, "refused", "the model refused: "
                          + self._redactor.redact(" ".join(refusal.split())[:120]).text)
        finish_reason = choice.get("finish_reason")
        if finish_reason == "length":
            return finish(spend, "truncated", "the answer hit max_tokens (length)")
        if finish_reason == "content_filter":
            return finish(spend, "refused", "the server filtered the answer")
        return content

    def _adjust(self, body: dict[str, Any], response: httpx.Response) -> str | None:
        """Take out of ``body`` what the server said it refuses, remembering it for the
        runs after; None when the refusal names nothing that can go (or is an overflow)."""
        if _context_overflow(response) or is_quota(response):
            return None
        info = error_info(response)
        said = f"{info.param} {info.code} {info.message}".lower()
        if "max_tokens" in body and ("max_completion_tokens" in said
                                     or info.param == "max_tokens"):
            body["max_completion_tokens"] = body.pop("max_tokens")
            self._refused.add("max_tokens")
            return "max_tokens (sending max_completion_tokens)"
        if "temperature" in body and "temperature" in said:
            del body["temperature"]
            self._refused.add("temperature")
            return "temperature 0"
        if "response_format" in body:
            # Support varies by server and version, and not every server says why.
            del body["response_format"]
            self._refused.add("response_format")
            return "response_format"
        return None

    def _usage(self, data: dict[str, Any], body: dict[str, Any], content: str) -> Usage:
        usage = data.get("usage")
        model = data.get("model") if isinstance(data.get("model"), str) else self._model
        prompt = completion = None
        if isinstance(usage, dict):
            prompt = _count(usage.get("prompt_tokens"))
            completion = _count(usage.get("completion_tokens"))
        if prompt and completion is not None:
            return Usage(tokens=prompt + completion, confidence="exact", engine=self.name,
                         model=model)
        # No usage, or a prompt count of 0 for a non-empty prompt: estimate (see module doc).
        sent = "".join(str(m.get("content", "")) for m in body["messages"])
        out = completion if completion is not None else estimate_tokens(content)
        return Usage(tokens=estimate_tokens(sent) + out, confidence="estimated",
                     engine=self.name, model=model)


def _prompt_tokens(body: dict[str, Any]) -> int:
    """A call's input, conservatively (no server here counts before a call)."""
    return conservative_tokens({k: body[k] for k in ("messages", "response_format")
                                if k in body})


def _count(value: Any) -> int | None:
    """A token count as reported: a non-negative int, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _context_overflow(response: httpx.Response) -> bool:
    """The prompt does not fit the model's context (llama.cpp says so at 400 or 500,
    with ``exceed_context_size_error``): never retried, never re-sent."""
    if response.status_code not in (400, 413, 422, 500):
        return False
    text = error_text(response, limit=400).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def _failure(response: httpx.Response, redactor: Redactor) -> tuple[str, str]:
    status, detail = response.status_code, error_text(response, redactor=redactor)
    if is_quota(response):  # insufficient_quota, budget_exceeded, credit too low
        return "usage_limit", detail
    if status in (401, 403, 404):
        return "engine_unavailable", detail
    if status == 413 or _context_overflow(response):
        return "truncated", detail
    return "engine_error", detail
