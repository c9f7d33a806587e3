"""Asking an OpenAI-compatible server for its model's window (``window_discovery``), in
the shapes vLLM, llama.cpp and Ollama answer, and the engine remembering it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from service.engine.openai_compatible import OpenAICompatibleEngine
from service.engine.window_discovery import discover, server_root
from service.engine.windows import Window

URL = "http://127.0.0.1:8000/v1"


def test_the_server_root_drops_v1() -> None:
    assert server_root("http://h:8080/v1/") == "http://h:8080"
    assert server_root("http://h:8080/api") == "http://h:8080/api"


def serving(routes: dict[tuple[str, str], Any], seen: list[str]) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        body = routes.get((request.method, request.url.path))
        if body is None:
            return httpx.Response(404, json={"error": "not found"})
        if isinstance(body, httpx.Response):
            return body
        return httpx.Response(200, json=body)
    return httpx.MockTransport(handle)


@pytest.mark.anyio
async def test_vllm_is_asked_first_and_answers() -> None:
    seen: list[str] = []
    transport = serving({("GET", "/v1/models"): {"data": [{"id": "m", "max_model_len": 32768}]}},
                        seen)
    found, answered = await discover(URL, "m", headers={}, transport=transport)
    assert found == Window(32_768, "the server's /v1/models (max_model_len)") and answered
    assert seen == ["GET /v1/models"]


@pytest.mark.anyio
async def test_llama_cpp_then_ollama_are_asked_when_the_listing_says_nothing() -> None:
    seen: list[str] = []
    llama = serving({("GET", "/v1/models"): {"data": [{"id": "m", "meta": {"n_ctx_train": 1}}]},
                     ("GET", "/props"): {"default_generation_settings": {"n_ctx": 8192}}}, seen)
    found, _ = await discover(URL, "m", headers={}, transport=llama)
    assert found is not None and found.tokens == 8_192
    seen.clear()
    ollama = serving({("POST", "/api/show"): {"parameters": "num_ctx 12288", "details": {}}},
                     seen)
    found, _ = await discover("http://127.0.0.1:11434/v1", "m", headers={}, transport=ollama)
    assert found is not None and found.tokens == 12_288
    assert seen == ["GET /v1/models", "GET /props", "POST /api/show"]


@pytest.mark.anyio
async def test_a_server_that_does_not_answer_is_asked_again_on_the_next_run() -> None:
    calls: list[str] = []

    def down(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ConnectError("refused", request=request)

    engine = OpenAICompatibleEngine(model="gpt-4o", api_url=URL, environ={},
                                    transport=httpx.MockTransport(down))
    first = await engine.window()
    assert first.tokens == 128_000  # the table, for now
    await engine.window()
    assert calls.count("/v1/models") == 2  # not remembered: asked again


@pytest.mark.anyio
async def test_a_server_that_answered_is_asked_once_and_the_key_is_sent() -> None:
    seen: list[str] = []
    keys: list[str | None] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        keys.append(request.headers.get("authorization"))
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m", "max_model_len": 16384}]})
        return httpx.Response(200, json=json.loads("{}"))

    engine = OpenAICompatibleEngine(model="m", api_url=URL, environ={"K": "sk-local"},
                                    api_key_env="K", transport=httpx.MockTransport(handle))
    assert (await engine.window()).tokens == 16_384
    assert (await engine.sizing(30_000)).window.tokens == 16_384
    assert seen == ["/v1/models"] and keys == ["Bearer sk-local"]


@pytest.mark.anyio
async def test_the_configured_window_asks_nothing() -> None:
    def never(request: httpx.Request) -> httpx.Response:
        raise AssertionError("asked the server")

    engine = OpenAICompatibleEngine(model="m", api_url=URL, environ={}, context_tokens=9_000,
                                    transport=httpx.MockTransport(never))
    assert await engine.window() == Window(9_000, "engine.context_tokens")
