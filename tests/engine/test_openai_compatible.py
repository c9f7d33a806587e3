"""The openai_compatible engine against httpx.MockTransport with real server shapes
(Ollama, llama.cpp server, vLLM)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.config.schema import EngineConfig
from service.engine.base import EngineRequest, estimate_tokens
from service.engine.factory import build_engine
from service.engine.findings import ask_schema, review_schema
from service.engine.openai_compatible import OpenAICompatibleEngine
from tests.engine.chat_server import chat_only
from tests.engine.questions import ANSWER as ASKED
from tests.engine.questions import ask

NOW = datetime(2026, 3, 25, 12, 0, tzinfo=UTC)
URL = "http://localhost:11434/v1"
DIFF = """diff --git a/main.go b/main.go
--- a/main.go
+++ b/main.go
@@ -1,1 +1,2 @@
 package main
+import "os/exec"
"""
REVIEW = {"summary": "Adds an import.", "risk": "low", "findings": [
    {"path": "main.go", "line": 2, "side": "RIGHT", "severity": "nit",
     "category": "maintainability", "title": "Unused import",
     "body": "os/exec is not used; the build will fail."}]}



def completion(content: str, *, finish: str = "stop", usage: Any = "default",
               model: str = "qwen2.5-coder:14b") -> dict[str, Any]:
    """A chat.completion body as Ollama's OpenAI layer returns it."""
    body: dict[str, Any] = {
        "id": "chatcmpl-187", "object": "chat.completion", "created": 1774440000,
        "model": model, "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish}],
        "usage": {"prompt_tokens": 812, "completion_tokens": 120, "total_tokens": 932},
    }
    if usage is None:
        del body["usage"]
    elif usage != "default":
        body["usage"] = usage
    return body


def oai_error(status: int, message: str, kind: str = "invalid_request_error",
              headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, headers=headers or {}, json={
        "error": {"message": message, "type": kind, "param": None, "code": None}})


class Server:
    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        item = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(item, Exception):
            raise item
        return item

    def body(self, n: int) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.requests[n].content)
        return data


def request(tmp_path: Path, **overrides: Any) -> EngineRequest:
    fields: dict[str, Any] = {
        "command": "review", "workdir": tmp_path, "diff": DIFF,
        "changed_paths": ("main.go",), "title": "Use exec", "body": "",
        "guidelines": None, "base_sha": "a" * 40, "head_sha": "b" * 40,
        "reviewed_since": None, "mode": "full", "max_turns": 10,
        "wall_clock_seconds": 10.0, "max_run_tokens": 60_000,
    }
    fields.update(overrides)
    return EngineRequest(**fields)


async def run(tmp_path: Path, server: Server, sleeps: list[float] | None = None,
              req: EngineRequest | None = None, **kwargs: Any) -> Any:
    slept = sleeps if sleeps is not None else []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    options: dict[str, Any] = {"model": "qwen2.5-coder:14b", "api_url": URL, "environ": {}}
    options.update(kwargs)
    engine = OpenAICompatibleEngine(transport=httpx.MockTransport(chat_only(server)),
                                    sleep=sleep,
                                    clock=lambda: NOW, **options)
    return await engine.run(req or request(tmp_path))


@pytest.mark.anyio
async def test_success_with_reported_usage(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion(json.dumps(REVIEW))))
    result = await run(tmp_path, server)
    assert result.stop_reason == "completed", result.detail
    assert (result.usage.tokens, result.usage.confidence) == (932, "exact")
    assert result.usage.engine == "openai_compatible"
    assert result.usage.model == "qwen2.5-coder:14b"
    assert result.findings[0].title == "Unused import"
    sent = server.requests[0]
    assert sent.url == URL + "/chat/completions"
    assert "authorization" not in sent.headers
    body = server.body(0)
    assert body["response_format"] == {"type": "json_object"}
    assert body["stream"] is False
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


@pytest.mark.anyio
async def test_missing_usage_is_estimated_from_characters(tmp_path: Path) -> None:
    content = json.dumps(REVIEW)
    server = Server(httpx.Response(200, json=completion(content, usage=None)))
    result = await run(tmp_path, server)
    assert result.stop_reason == "completed"
    sent = "".join(m["content"] for m in server.body(0)["messages"])
    assert result.usage.confidence == "estimated"
    assert result.usage.tokens == estimate_tokens(sent) + estimate_tokens(content)


@pytest.mark.anyio
async def test_zero_prompt_tokens_from_a_cache_hit_is_estimated(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion(json.dumps(REVIEW), usage={
        "prompt_tokens": 0, "completion_tokens": 77, "total_tokens": 77})))
    result = await run(tmp_path, server)
    sent = "".join(m["content"] for m in server.body(0)["messages"])
    assert result.usage.confidence == "estimated"
    assert result.usage.tokens == estimate_tokens(sent) + 77


@pytest.mark.anyio
async def test_finish_reason_length_is_truncated(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion('{"summary": "cut', finish="length")))
    result = await run(tmp_path, server)
    assert result.stop_reason == "truncated"
    assert (result.usage.tokens, result.usage.confidence) == (932, "exact")


@pytest.mark.anyio
async def test_unsupported_response_format_is_dropped_once(tmp_path: Path) -> None:
    server = Server(oai_error(400, "response_format type json_object is not supported"),
                    httpx.Response(200, json=completion(
                        "Here you go:\n```json\n" + json.dumps(REVIEW) + "\n```")))
    result = await run(tmp_path, server)
    assert result.stop_reason == "completed", result.detail
    assert "response_format" in server.body(0)
    assert "response_format" not in server.body(1)


@pytest.mark.anyio
async def test_context_overflow_is_over_the_window_without_a_second_try(
        tmp_path: Path) -> None:
    server = Server(oai_error(400, "This model's maximum context length is 8192 tokens. "
                                   "However, you requested 9000 tokens."))
    result = await run(tmp_path, server)
    assert (result.stop_reason, result.over_window) == ("refused", True)
    assert "context window of 8,192 tokens" in result.detail
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_connection_refused_is_engine_unavailable(tmp_path: Path) -> None:
    sleeps: list[float] = []
    server = Server(httpx.ConnectError("[Errno 111] Connection refused"))
    result = await run(tmp_path, server, sleeps)
    assert result.stop_reason == "engine_unavailable"
    assert (result.usage.tokens, result.usage.confidence) == (0, "exact")
    assert len(server.requests) == 3


@pytest.mark.anyio
async def test_server_errors_after_retries_are_engine_errors(tmp_path: Path) -> None:
    sleeps: list[float] = []
    server = Server(oai_error(500, "model runner has unexpectedly stopped", "api_error"))
    result = await run(tmp_path, server, sleeps)
    assert result.stop_reason == "engine_error"
    assert "unexpectedly stopped" in result.detail
    assert sleeps == [0.5, 1.0]


@pytest.mark.anyio
async def test_429_honours_http_date_retry_after(tmp_path: Path) -> None:
    sleeps: list[float] = []
    server = Server(oai_error(429, "rate limited", "rate_limit_error",
                              {"retry-after": "Wed, 25 Mar 2026 12:00:03 GMT"}),
                    httpx.Response(200, json=completion(json.dumps(REVIEW))))
    result = await run(tmp_path, server, sleeps)
    assert result.stop_reason == "completed"
    assert sleeps == [3.0]


@pytest.mark.anyio
async def test_malformed_json_is_an_engine_error_with_unknown_usage(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, content=b"<html>Bad Gateway</html>"))
    result = await run(tmp_path, server)
    assert result.stop_reason == "engine_error"
    assert (result.usage.tokens, result.usage.confidence) == (None, "unavailable")


@pytest.mark.anyio
async def test_invalid_answer_then_repair(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion('{"summary": "fine"}')),
                    httpx.Response(200, json=completion(json.dumps(REVIEW), usage={
                        "prompt_tokens": 1000, "completion_tokens": 100,
                        "total_tokens": 1100})))
    result = await run(tmp_path, server)
    assert result.stop_reason == "completed", result.detail
    assert (result.usage.tokens, result.usage.confidence) == (2032, "exact")
    messages = server.body(1)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert "risk" in messages[3]["content"]


@pytest.mark.anyio
async def test_json_schema_format_and_bearer_key(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion(json.dumps(REVIEW))))
    result = await run(tmp_path, server, response_format="json_schema",
                       api_key_env="VLLM_KEY", environ={"VLLM_KEY": "local-secret"})
    assert result.stop_reason == "completed"
    assert server.requests[0].headers["authorization"] == "Bearer local-secret"
    fmt = server.body(0)["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == review_schema("full")


@pytest.mark.anyio
async def test_factory_requires_url_and_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="api_url"):
        build_engine(EngineConfig(kind="openai_compatible", model="llama3"), {})
    config = EngineConfig(kind="openai_compatible", model="llama3")
    object.__setattr__(config, "api_url", "http://127.0.0.1:8080/v1")
    server = Server(httpx.Response(200, json=completion(json.dumps(REVIEW))))
    engine = build_engine(config, {}, transport=httpx.MockTransport(chat_only(server)))
    assert engine.name == "openai_compatible"
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "completed"
    assert server.requests[0].url == "http://127.0.0.1:8080/v1/chat/completions"
    with pytest.raises(ValueError, match="kind"):
        build_engine(EngineConfig(kind="gpt"), {})
    assert build_engine(EngineConfig(), {"PATH": "/usr/bin"}).name == "claude_code"


@pytest.mark.anyio
async def test_each_call_asks_only_the_answer_the_models_window_leaves(tmp_path: Path) -> None:
    # OpenAI and vLLM refuse prompt + max_tokens over the window, however short the answer.
    server = Server(httpx.Response(200, json=completion(json.dumps(REVIEW))))
    engine = OpenAICompatibleEngine(model="m", api_url=URL, environ={}, context_tokens=5_000,
                                    transport=httpx.MockTransport(chat_only(server)))
    req = request(tmp_path)
    prompt = await engine.price(req)
    result = await engine.run(req)
    assert result.stop_reason == "completed"
    assert server.body(0)["max_tokens"] == 5_000 - prompt < 8_192


@pytest.mark.anyio
async def test_a_prompt_over_the_window_is_not_sent(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion(json.dumps(REVIEW))))
    engine = OpenAICompatibleEngine(model="m", api_url=URL, environ={}, context_tokens=1_500,
                                    transport=httpx.MockTransport(chat_only(server)))
    result = await engine.run(request(tmp_path))
    assert (result.stop_reason, result.over_window) == ("refused", True)
    assert "context window 1,500" in result.detail
    assert server.requests == []


@pytest.mark.anyio
async def test_an_openai_compatible_server_answers_in_json(tmp_path: Path) -> None:
    server = Server(httpx.Response(200, json=completion(json.dumps(ASKED))))
    result = await run(tmp_path, server, response_format="json_schema",
                              req=ask(tmp_path, request(tmp_path)))
    assert result.stop_reason == "completed", result.detail
    assert result.answer == ASKED["answer"]
    fmt = server.body(0)["response_format"]
    assert fmt["json_schema"] == {"name": "ask", "schema": ask_schema()}
