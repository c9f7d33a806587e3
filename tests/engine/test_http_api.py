"""The HTTP engines against servers that answer as the real ones do: the Anthropic
Messages API, OpenAI's chat completions, vLLM, Ollama, llama.cpp and a LiteLLM proxy.

The fakes below answer with those servers' status codes, headers and body shapes (each
case says whose). What is pinned: a run never settles above its reservation, whatever
the diff and the cap; a wait the wall clock cannot hold ends at once at no cost; a key a
server echoes is never recorded; and each server's way of saying "too long", "out of
quota", "refused" or "not that parameter" ends the way docs/ENGINE.md says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.engine.anthropic import AnthropicEngine
from service.engine.base import EngineRequest, EngineResult
from service.engine.http_api import MAX_RESPONSE_BYTES, REQUESTS_PER_CALL
from service.engine.openai_compatible import OpenAICompatibleEngine
from service.engine.sizing import MIN_ANSWER_TOKENS
from tests.engine.chat_server import chat_only
from tests.kit.thorough import examples

KEY = "sk-proxy-echoed-key-0123456789abcdef"
ANTHROPIC_KEY = "sk-ant-api03-" + "k" * 40
VALID = {"summary": "Adds a check.", "risk": "low", "findings": []}
Handler = Callable[[httpx.Request], httpx.Response]



def diff_of(lines: int) -> str:
    body = "".join(f"+    value_{n} = compute({n}, 'some text to review')\n"
                   for n in range(lines))
    return (f"diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n"
            f"@@ -0,0 +1,{lines} @@\n{body}")


def request(tmp_path: Path, *, lines: int = 5, cap: int = 60_000,
            wall_clock: float = 30.0) -> EngineRequest:
    return EngineRequest(
        command="review", workdir=tmp_path, diff=diff_of(lines), changed_paths=("app.py",),
        title="Compute values", body="Please review.", guidelines=None, base_sha="a" * 40,
        head_sha="b" * 40, reviewed_since=None, mode="full", max_turns=5,
        wall_clock_seconds=wall_clock, max_run_tokens=cap)


class Recorder:
    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)

    def bodies(self, path_end: str = "") -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests if r.url.path.endswith(path_end)]


async def no_sleep(seconds: float) -> None:
    return None


def anthropic(handler: Handler, **kwargs: Any) -> tuple[AnthropicEngine, Recorder]:
    recorder = Recorder(handler)
    return AnthropicEngine(model="claude-sonnet-4-5", environ={"ANTHROPIC_API_KEY":
                                                               ANTHROPIC_KEY},
                           transport=httpx.MockTransport(recorder),
                           **{"sleep": no_sleep, **kwargs}), recorder


def openai(handler: Handler, **kwargs: Any) -> tuple[OpenAICompatibleEngine, Recorder]:
    recorder = Recorder(handler)
    return OpenAICompatibleEngine(
        model="gpt-5", api_url="http://127.0.0.1:4000/v1", environ={"PROXY_KEY": KEY},
        api_key_env="PROXY_KEY", transport=httpx.MockTransport(chat_only(recorder)),
        **{"sleep": no_sleep, **kwargs}), recorder


def error(status: int, message: str, kind: str = "invalid_request_error", *,
          code: Any = None, param: Any = None, headers: dict[str, str] | None = None
          ) -> httpx.Response:
    """OpenAI's error shape (also vLLM's current one, llama.cpp's and LiteLLM's)."""
    return httpx.Response(status, headers=headers, json={"error": {
        "message": message, "type": kind, "param": param, "code": code}})


def completion(content: str | None, *, prompt_tokens: int = 900, completion_tokens: int = 60,
               refusal: str | None = None, finish: str = "stop") -> httpx.Response:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if refusal is not None:
        message["refusal"] = refusal
    return httpx.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1764590000,
        "model": "gpt-5", "choices": [{"index": 0, "message": message,
                                       "finish_reason": finish}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens}})


# -- 1. The reservation is a cap --------------------------------------------------------


def tokens_of(value: Any, per: int) -> int:
    return -(-len(json.dumps(value).encode()) // per)


def anthropic_server(answer_tokens: int, valid_after: int) -> Handler:
    """The Messages API: count_tokens and the message agree on the input (4 bytes a
    token); the answer is as long as asked for, up to ``max_tokens``; the first
    ``valid_after`` answers fail validation."""
    calls = {"n": 0}

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent = {k: body[k] for k in ("system", "messages", "tools")}
        if request.url.path.endswith("/count_tokens"):
            return httpx.Response(200, json={"input_tokens": tokens_of(sent, 4)})
        calls["n"] += 1
        output = min(body["max_tokens"], answer_tokens)
        answer = VALID if calls["n"] > valid_after else {"summary": "x", "risk": "nope",
                                                         "findings": []}
        return httpx.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": body["model"],
            "content": [{"type": "tool_use", "id": f"toolu_{calls['n']}",
                         "name": "submit_review", "input": answer}],
            "stop_reason": "tool_use" if output < body["max_tokens"] else "max_tokens",
            "usage": {"input_tokens": tokens_of(sent, 4), "output_tokens": output,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})

    return handle


def openai_server(answer_tokens: int, valid_after: int) -> Handler:
    """A chat-completions server counting 3 bytes a token (no tokenizer is kinder)."""
    calls = {"n": 0}

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls["n"] += 1
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        output = min(limit, answer_tokens)
        text = json.dumps(VALID if calls["n"] > valid_after else {"risk": "nope"})
        return completion(text, prompt_tokens=tokens_of(body["messages"], 3),
                          completion_tokens=output,
                          finish="stop" if output < limit else "length")

    return handle


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.integers(1, 4_000), cap=st.integers(2_000, 80_000),
       answer=st.integers(50, 90_000), valid_after=st.integers(0, 2),
       kind=st.sampled_from(["anthropic", "openai"]))
@pytest.mark.anyio
async def test_no_run_settles_above_its_reservation(
        tmp_path: Path, lines: int, cap: int, answer: int, valid_after: int,
        kind: str) -> None:
    make = anthropic if kind == "anthropic" else openai
    server = anthropic_server if kind == "anthropic" else openai_server
    engine, recorder = make(server(answer, valid_after))
    result = await engine.run(request(tmp_path, lines=lines, cap=cap))
    assert result.usage.tokens is not None
    assert result.usage.tokens <= cap, (result.stop_reason, result.detail)
    # The calls (count_tokens is asked without a max_tokens).
    sent = [b for b in recorder.bodies() if "max_tokens" in b or "max_completion_tokens" in b]
    for body in sent:  # every call asked for no more than was left
        assert (body.get("max_tokens") or body["max_completion_tokens"]) >= MIN_ANSWER_TOKENS
    if result.stop_reason == "refused":
        assert result.usage.tokens == 0 and "tokens and" in result.detail


@pytest.mark.anyio
async def test_a_prompt_that_cannot_fit_is_refused_before_anything_is_sent(
        tmp_path: Path) -> None:
    engine, recorder = anthropic(anthropic_server(500, 0))
    result = await engine.run(request(tmp_path, lines=4_000, cap=30_000))
    assert result.stop_reason == "refused" and result.usage.tokens == 0
    assert "the prompt is" in result.detail and "30,000 are left" in result.detail
    assert [r.url.path for r in recorder.requests] == ["/v1/messages/count_tokens"]


@pytest.mark.anyio
async def test_a_repair_gets_only_what_is_left_and_is_skipped_when_that_is_too_little(
        tmp_path: Path) -> None:
    # The first answer (2 000 tokens) is invalid: the repair has what is left.
    engine, recorder = anthropic(anthropic_server(2_000, 1))
    result = await engine.run(request(tmp_path, lines=40, cap=40_000))
    first, repair = recorder.bodies("/v1/messages")
    first_input = tokens_of({k: first[k] for k in ("system", "messages", "tools")}, 4)
    repair_input = tokens_of({k: repair[k] for k in ("system", "messages", "tools")}, 4)
    assert repair["max_tokens"] <= 40_000 - (first_input + 2_000) - repair_input
    assert result.stop_reason == "completed", result.detail
    assert result.usage.tokens is not None and result.usage.tokens <= 40_000
    # With less left than an answer needs after the first call, no repair is made.
    tight = first_input + 2_000 + repair_input + MIN_ANSWER_TOKENS // 2
    engine, recorder = anthropic(anthropic_server(2_000, 1))
    result = await engine.run(request(tmp_path, lines=40, cap=tight))
    assert len(recorder.bodies("/v1/messages")) == 1
    assert result.stop_reason == "engine_error" and "no repair" in result.detail


# -- 2. A wait the wall clock cannot hold ------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_retry_after_past_the_wall_clock_ends_at_once_at_no_cost(
        tmp_path: Path, kind: str) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/count_tokens"):
            return httpx.Response(200, json={"input_tokens": 500})
        return error(429, "Rate limit reached", "rate_limit_error",
                     headers={"retry-after": "45"})

    make = anthropic if kind == "anthropic" else openai
    engine, _ = make(handle, sleep=sleep)
    result = await engine.run(request(tmp_path, wall_clock=30.0))
    assert result.stop_reason == "engine_error"
    assert (result.usage.tokens, result.usage.confidence) == (0, "exact")
    assert slept == []  # not slept into the deadline
    assert "429" in result.detail


# -- 3. A key a server echoes ------------------------------------------------------------


@pytest.mark.anyio
async def test_a_key_a_proxy_echoes_is_never_recorded(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    engine, _ = openai(lambda r: error(401, f"Authentication Error, Invalid proxy server "
                                            f"token passed. Received API Key = {KEY}",
                                       "auth_error", code="401"))
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "engine_unavailable"
    assert KEY not in result.detail and "[redacted" in result.detail
    assert KEY not in caplog.text


# -- 4. What real servers answer ----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 500])
async def test_llama_cpp_context_overflow_is_over_the_window_with_one_request(
        tmp_path: Path, status: int) -> None:
    engine, recorder = openai(lambda r: httpx.Response(status, json={"error": {
        "code": status, "type": "exceed_context_size_error", "n_prompt_tokens": 9000,
        "n_ctx": 4096,
        "message": "the request exceeds the available context size, try increasing it"}}))
    result = await engine.run(request(tmp_path))
    assert (result.stop_reason, result.over_window) == ("refused", True)
    assert (result.usage.tokens, result.usage.confidence) == (0, "exact")
    assert len(recorder.requests) == 1  # not re-sent without response_format, no retries


@pytest.mark.anyio
async def test_older_vllm_error_bodies_are_read(tmp_path: Path) -> None:
    engine, recorder = openai(lambda r: httpx.Response(400, json={
        "object": "error", "type": "BadRequestError", "param": None, "code": 400,
        "message": "This model's maximum context length is 4096 tokens. However, you "
                   "requested 9000 tokens (8000 in the messages, 1000 in the completion)."}))
    result = await engine.run(request(tmp_path))
    assert (result.stop_reason, result.over_window) == ("refused", True)
    assert "over the model's context window of 4,096 tokens" in result.detail
    assert "maximum context length is 4096" in result.detail
    assert len(recorder.requests) == 1


@pytest.mark.anyio
async def test_a_structured_outputs_refusal_is_refused_without_a_repair(
        tmp_path: Path) -> None:
    engine, recorder = openai(lambda r: completion(None, refusal="I'm sorry, I cannot "
                                                                 "help with that."))
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "refused" and "cannot help" in result.detail
    assert len(recorder.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("answer", [
    error(429, "You exceeded your current quota, please check your plan and billing "
               "details.", "insufficient_quota", code="insufficient_quota"),  # OpenAI
    error(429, "Budget has been exceeded! Current cost: 10.2, Max budget: 10.0",
          "budget_exceeded", code="429"),                                      # LiteLLM
    error(400, "Budget has been exceeded! Current cost: 10.2, Max budget: 10.0",
          "budget_exceeded", code="400"),                                      # LiteLLM
    httpx.Response(400, json={"type": "error", "error": {                      # Anthropic
        "type": "invalid_request_error", "message": "Your credit balance is too low to "
        "access the Anthropic API. Please go to Plans & Billing to upgrade or purchase "
        "credits."}}),
], ids=["openai-insufficient-quota", "litellm-429", "litellm-400", "anthropic-credit"])
async def test_quota_and_budget_stops_are_usage_limit_without_retries(
        tmp_path: Path, answer: httpx.Response) -> None:
    engine, recorder = openai(lambda r: answer)
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "usage_limit", result.detail
    assert len(recorder.requests) == 1


@pytest.mark.anyio
async def test_the_anthropic_engine_reads_a_credit_balance_too_low_as_usage_limit(
        tmp_path: Path) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/count_tokens"):
            return httpx.Response(200, json={"input_tokens": 500})
        return httpx.Response(400, json={"type": "error", "error": {
            "type": "invalid_request_error",
            "message": "Your credit balance is too low to access the Anthropic API."}})

    engine, _ = anthropic(handle)
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "usage_limit", result.detail


@pytest.mark.anyio
async def test_reasoning_before_the_answer_does_not_break_it(tmp_path: Path) -> None:
    text = ("<think>The user wants {a review}. Let me check } and {.</think>\n"
            + json.dumps(VALID))
    engine, _ = openai(lambda r: completion(text))
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "completed", result.detail


@pytest.mark.anyio
async def test_a_reasoning_model_is_asked_the_way_it_takes_and_remembered(
        tmp_path: Path) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if "max_tokens" in body:  # OpenAI's o-series and gpt-5 answers
            return error(400, "Unsupported parameter: 'max_tokens' is not supported with "
                              "this model. Use 'max_completion_tokens' instead.",
                         code="unsupported_parameter", param="max_tokens")
        if body.get("temperature") == 0:
            return error(400, "Unsupported value: 'temperature' does not support 0 with "
                              "this model. Only the default (1) value is supported.",
                         code="unsupported_value", param="temperature")
        return completion(json.dumps(VALID))

    engine, recorder = openai(handle)
    first = await engine.run(request(tmp_path))
    assert first.stop_reason == "completed", first.detail
    assert len(recorder.requests) == 3
    assert "response_format" in recorder.bodies()[-1]  # not dropped for nothing
    again = await engine.run(request(tmp_path))
    assert again.stop_reason == "completed"
    assert len(recorder.requests) == 4  # the second run asked right the first time


@pytest.mark.anyio
async def test_one_call_makes_a_bounded_number_of_requests(tmp_path: Path) -> None:
    engine, recorder = openai(lambda r: error(400, "Bad request", code=None))
    result = await engine.run(request(tmp_path))
    assert result.stop_reason == "engine_error"
    assert len(recorder.requests) <= REQUESTS_PER_CALL
    assert len(recorder.requests) == 2  # once as asked, once without response_format


@pytest.mark.anyio
async def test_a_huge_invalid_answer_is_sent_back_capped(tmp_path: Path) -> None:
    bloated = json.dumps({"summary": "x" * 1_000_000, "risk": "low", "findings": "no"})
    answers = iter([completion(bloated, completion_tokens=10), completion(json.dumps(VALID))])
    engine, recorder = openai(lambda r: next(answers))
    result = await engine.run(request(tmp_path, cap=2_000_000))
    assert result.stop_reason == "completed", result.detail
    repair = recorder.bodies()[1]
    resent = repair["messages"][-2]["content"]
    assert repair["messages"][-2]["role"] == "assistant" and len(resent) <= 40_100


@pytest.mark.anyio
async def test_an_answer_larger_than_the_limit_is_not_read(tmp_path: Path) -> None:
    engine, _ = openai(lambda r: httpx.Response(
        200, content=b'{"choices": "' + b"x" * (MAX_RESPONSE_BYTES + 10) + b'"}'))
    result: EngineResult = await engine.run(request(tmp_path))
    assert result.stop_reason == "engine_error" and "larger than" in result.detail
    assert result.usage.confidence == "unavailable"  # it was answered: maybe billed
