"""An OpenAI-compatible chat-completions server as an engine (Ollama, llama.cpp, vLLM).

One non-streaming ``POST {api_url}/chat/completions`` per review, the rules as the
system message and the prompt as the user message, asking for JSON through
``response_format`` (``json_object`` by default, ``json_schema`` with the findings schema
when configured, or none). A server that rejects ``response_format`` with a 400/422 is
asked once more without it: support varies by server and version.

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

from service.budget import Usage
from service.config import Secret
from service.engine.base import EngineRequest, EngineResult, estimate_tokens
from service.engine.findings import parse_answer_text, schema_for
from service.engine.http_api import (
    CallFailed,
    RunUsage,
    Sleep,
    answer_with_one_repair,
    call_failed,
    error_text,
    finish,
    post_json,
    run_guarded,
)
from service.engine.prompt import build_prompt, repair_message, system_rules

log = logging.getLogger(__name__)

ResponseFormat = Literal["json_object", "json_schema", "none"]
RESPONSE_FORMATS: Final = ("json_object", "json_schema", "none")
_CONTEXT_MARKERS: Final = ("context length", "context window", "maximum context",
                           "too many tokens", "prompt is too long", "exceeds the context")


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
    ) -> None:
        if not model:
            raise ValueError("engine.model is required for the openai_compatible engine")
        if not api_url.startswith(("http://", "https://")):
            raise ValueError("engine.api_url must be an http(s) URL for openai_compatible")
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"engine.response_format must be one of {RESPONSE_FORMATS}")
        key = environ.get(api_key_env, "") if api_key_env else ""
        self._key = Secret(key) if key else None
        self._model = model
        self._url = api_url.rstrip("/") + "/chat/completions"
        self._max_tokens = max_tokens
        self._format = response_format
        self._transport = transport
        self._sleep = sleep
        self._clock = clock or (lambda: datetime.now(UTC))
        self._max_retries = max_retries
        self._max_retry_wait = max_retry_wait

    async def run(self, request: EngineRequest) -> EngineResult:
        """Review or describe ``request``; every outcome is a result."""
        return await run_guarded(self.name, self._model, request, self._run)

    async def _run(self, request: EngineRequest, spend: RunUsage) -> EngineResult:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [
                {"role": "system", "content": system_rules(request.command, request.mode,
                                                           can_read_files=False)},
                {"role": "user", "content": build_prompt(request)},
            ],
            "max_tokens": min(self._max_tokens, request.max_run_tokens),
            "temperature": 0,
            "stream": False,
        }
        if self._format == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif self._format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": request.command, "schema": schema_for(request.command, request.mode)}}
        timeout = httpx.Timeout(request.wall_clock_seconds, connect=10.0)
        async with httpx.AsyncClient(transport=self._transport, timeout=timeout) as client:
            return await answer_with_one_repair(
                spend, request, lambda: self._call(client, body, spend, request),
                lambda reply: parse_answer_text(request.command, request.mode, reply),
                lambda reply, problem: body["messages"].extend([
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": repair_message(problem)}]))

    async def _call(self, client: httpx.AsyncClient, body: dict[str, Any], spend: RunUsage,
                    request: EngineRequest) -> str | EngineResult:
        """One completion; its text, or the run's result when it failed."""
        headers = {"authorization": f"Bearer {self._key.reveal()}"} if self._key else {}
        spend.in_flight = True
        response = await post_json(
            client, self._url, headers=headers, body=body, sleep=self._sleep,
            clock=self._clock, max_retries=self._max_retries,
            max_retry_wait=self._max_retry_wait, log_extra=request.log_extra)
        if (not isinstance(response, CallFailed) and response.status_code in (400, 422)
                and "response_format" in body and not _context_overflow(response)):
            log.info("the server rejected response_format; retrying without it",
                     extra={**request.log_extra, "engine": self.name})
            del body["response_format"]
            response = await post_json(
                client, self._url, headers=headers, body=body, sleep=self._sleep,
                clock=self._clock, max_retries=self._max_retries,
                max_retry_wait=self._max_retry_wait, log_extra=request.log_extra)
        spend.in_flight = False
        if isinstance(response, CallFailed):
            return call_failed(spend, response)
        if response.status_code != 200:
            return finish(spend, *_failure(response))
        try:
            data = response.json()
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            if not isinstance(content, str):
                raise TypeError("content is not text")
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
            spend.unknown()
            return finish(spend, "engine_error",
                              "the server answered 200 without a readable completion")
        spend.add(self._usage(data, body, content))
        finish_reason = choice.get("finish_reason")
        if finish_reason == "length":
            return finish(spend, "truncated", "the answer hit max_tokens (length)")
        if finish_reason == "content_filter":
            return finish(spend, "refused", "the server filtered the answer")
        return content

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


def _count(value: Any) -> int | None:
    """A token count as reported: a non-negative int, else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _context_overflow(response: httpx.Response) -> bool:
    text = error_text(response, limit=400).lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def _failure(response: httpx.Response) -> tuple[str, str]:
    status, detail = response.status_code, error_text(response)
    if status in (401, 403, 404):
        return "engine_unavailable", detail
    if status == 413 or (status in (400, 422) and _context_overflow(response)):
        return "truncated", detail
    return "engine_error", detail
