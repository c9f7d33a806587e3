"""What the two HTTP engines share: one POST with bounded retries, and error reading.

Retries follow the servers' own advice: 408/409/429/5xx/529 and connection failures are
retried, waiting ``retry-after-ms`` / ``retry-after`` (seconds or an HTTP date) when the
server gives one and a capped exponential backoff otherwise. A wait longer than
``max_retry_wait``, or than what is left of the run's wall clock, is not waited for: the
run ends at once instead, because sleeping into the deadline would hold a worker and
charge a reservation for a request nobody billed. A quota or budget that has run out
(``is_quota``) is never retried. Every request of one call — retries and the one-off
adjustments the OpenAI-compatible engine makes — comes out of one ``RequestBudget``.
``sleep`` is injectable so tests do not wait.

An answer is read up to ``MAX_RESPONSE_BYTES``; a larger one is not buffered. Error
bodies are read in both shapes servers use (``{"error": {...}}`` and vLLM's older
top-level ``{"object": "error", "message": ...}``), and what an engine records of them
passes a ``Redactor`` first: a self-hosted proxy may echo the key it was sent.

A rejected request is not billed, so failures report usage ``exact`` 0; only a call
that may have been processed (a timeout, a dropped connection mid-response, an answer
too large to read) leaves its usage unknown.
"""

from __future__ import annotations

import email.utils
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import anyio
import httpx

from service.budget.usage import Usage
from service.config.redact import Redactor
from service.engine import windows
from service.engine.base import (
    EngineRequest,
    EngineResult,
    combine_usage,
    no_usage,
    unknown_usage,
)
from service.engine.findings import Answer, InvalidAnswer
from service.engine.prompt import PREVIOUS_ANSWER_MAX_CHARS
from service.engine.sizing import Fit

log = logging.getLogger(__name__)

RETRY_STATUSES: Final = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_BACKOFF_SECONDS: Final = 8.0
#: The largest answer read: a review is a few KB; a server that streams megabytes of
#: garbage (or an answer of 30 MB) is cut off, not buffered.
MAX_RESPONSE_BYTES: Final = 8 * 1024 * 1024
#: Requests one call may make, retries and adjustments together.
REQUESTS_PER_CALL: Final = 4
_QUOTA_KINDS: Final = frozenset({"insufficient_quota", "budget_exceeded",
                                 "enforced_spend_limit_reached", "billing_hard_limit_reached"})
_QUOTA_TEXTS: Final = ("credit balance is too low", "exceeded your current quota",
                       "budget has been exceeded", "enforced_spend_limit_reached")

Sleep = Callable[[float], Awaitable[None]]
Reply = TypeVar("Reply")


@dataclass(frozen=True)
class CallFailed:
    """A call that produced no usable response. ``billed_unknown`` means the server may
    have processed (and charged) it; otherwise nothing was spent."""

    stop_reason: str
    detail: str
    status: int | None = None
    billed_unknown: bool = False


def retry_after_seconds(headers: httpx.Headers, now: datetime) -> float | None:
    """The wait a response asks for: ``retry-after-ms``, else ``retry-after`` in seconds
    or as an HTTP date (relative to ``now``). None when absent or unreadable."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


@dataclass(frozen=True)
class ErrorInfo:
    """An error answer's fields, from either body shape (see the module docstring)."""

    status: int
    kind: str  # ``type``, else ``code``
    code: str
    message: str
    param: str
    body: dict[str, Any]


def error_info(response: httpx.Response) -> ErrorInfo:
    try:
        body = response.json()
    except (ValueError, RecursionError):
        body = None
    error: Any = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str):
        error = {"message": error}
    if not isinstance(error, dict):
        # vLLM (older) and some proxies put the fields at the top level.
        error = body if isinstance(body, dict) and ("message" in body or
                                                   body.get("object") == "error") else {}

    def field(name: str) -> str:
        value = error.get(name)
        return "" if value is None else str(value)

    return ErrorInfo(status=response.status_code, kind=field("type") or field("code"),
                     code=field("code"), message=field("message"), param=field("param"),
                     body=error)


def error_text(response: httpx.Response, limit: int = 160,
               redactor: Redactor | None = None) -> str:
    """The message (and type) of an API error body, one line, capped, redacted."""
    info = error_info(response)
    text = f"{info.kind}: {info.message}" if info.kind and info.message else (
        info.message or info.kind)
    flat = " ".join(text.split())
    if redactor is not None:
        flat = redactor.redact(flat).text
    flat = flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return f"HTTP {response.status_code}" + (f" {flat}" if flat else "")


def is_quota(response: httpx.Response) -> bool:
    """A quota, credit or budget that has run out (OpenAI's ``insufficient_quota``,
    LiteLLM's ``budget_exceeded``, Anthropic's spend limit or "credit balance is too
    low"): no retry can help, and the run ends as ``usage_limit``."""
    if response.status_code not in (400, 402, 403, 429):
        return False
    info = error_info(response)
    details = info.body.get("details")
    detail_code = details.get("error_code") if isinstance(details, dict) else None
    text = f"{info.message} {detail_code or ''}".lower()
    return (info.kind in _QUOTA_KINDS or info.code in _QUOTA_KINDS
            or detail_code in _QUOTA_KINDS or any(t in text for t in _QUOTA_TEXTS))


class RequestBudget:
    """The requests one call may still make (``REQUESTS_PER_CALL``)."""

    def __init__(self, requests: int = REQUESTS_PER_CALL) -> None:
        self.left = requests

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        return True


async def _send(client: httpx.AsyncClient, url: str, content: bytes,
                headers: Mapping[str, str]) -> httpx.Response | CallFailed:
    """One POST, its answer read up to ``MAX_RESPONSE_BYTES``."""
    async with client.stream("POST", url, content=content, headers=headers) as streamed:
        data = bytearray()
        async for chunk in streamed.aiter_bytes():
            data += chunk
            if len(data) > MAX_RESPONSE_BYTES:
                return CallFailed("engine_error", "the server's answer was larger than "
                                  f"{MAX_RESPONSE_BYTES // (1024 * 1024)} MiB; not read",
                                  status=streamed.status_code,
                                  billed_unknown=streamed.status_code == 200)
        return httpx.Response(streamed.status_code, headers=streamed.headers,
                              content=bytes(data), request=streamed.request)


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    sleep: Sleep,
    clock: Callable[[], datetime],
    max_retries: int,
    max_retry_wait: float,
    give_up: Callable[[httpx.Response], bool] = lambda _r: False,
    log_extra: Mapping[str, object] | None = None,
    time_left: Callable[[], float] = lambda: float("inf"),
    budget: RequestBudget | None = None,
) -> httpx.Response | CallFailed:
    """POST ``body`` as JSON; return the final response (any status, retries spent) or a
    ``CallFailed`` for a transport failure. ``give_up`` marks responses never retried
    (a quota that ran out never is); ``time_left`` is the run's remaining wall clock."""
    content = json.dumps(body).encode()
    send_headers = {**headers, "content-type": "application/json"}
    budget = budget or RequestBudget(max_retries + 1)
    attempt = 0
    last: httpx.Response | CallFailed = CallFailed(
        "engine_error", "no request could be made: the call's request budget was spent")
    while budget.take():
        try:
            response = await _send(client, url, content, send_headers)
        except httpx.TimeoutException:
            return CallFailed("timeout", "the request timed out", billed_unknown=True)
        except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
            last = CallFailed("engine_unavailable",
                              f"cannot connect to the engine's server ({type(exc).__name__})")
            if attempt >= max_retries or isinstance(exc, httpx.UnsupportedProtocol):
                return last
            wait = None
        except httpx.TransportError as exc:  # dropped mid-response: may have been processed
            return CallFailed("engine_error", f"connection failed: {type(exc).__name__}",
                              billed_unknown=True)
        else:
            if isinstance(response, CallFailed):
                return response
            last = response
            if response.status_code not in RETRY_STATUSES or give_up(response) \
                    or is_quota(response) or attempt >= max_retries:
                return response
            wait = retry_after_seconds(response.headers, clock())
            if wait is not None and wait > min(max_retry_wait, time_left()):
                # Asked to wait longer than a run may, or than this run has left: report
                # it now rather than sleep into the deadline.
                return response
        delay = wait if wait is not None else min(0.5 * 2 ** attempt, MAX_BACKOFF_SECONDS)
        if delay >= time_left():
            return last
        attempt += 1
        log.info("engine request retry %d in %.1f s", attempt, delay,
                 extra={**(log_extra or {}), "attempt": attempt})
        await sleep(delay)
    return last


@dataclass
class Conversation:
    """One run's calls: the client, the request body as it grows (a repair appends to
    its messages), what was spent, and when the wall clock runs out."""

    client: httpx.AsyncClient
    body: dict[str, Any]
    spend: RunUsage
    request: EngineRequest
    deadline: float  # anyio.current_time() at which the wall clock runs out

    def time_left(self) -> float:
        return self.deadline - anyio.current_time()


class RunUsage:
    """The usage of a run's calls so far, and whether one is in flight (its cost then is
    unknown if the run is cut short)."""

    def __init__(self, engine: str, model: str | None) -> None:
        self.usage = no_usage(engine, model)
        self.in_flight = False

    def add(self, usage: Usage) -> None:
        self.usage = combine_usage(self.usage, usage)

    def unknown(self) -> None:
        """A call whose spend cannot be known: the whole run's becomes unavailable."""
        self.add(unknown_usage(self.usage.engine or "", self.usage.model))

    def final(self) -> Usage:
        """The usage to settle with, counting an interrupted call as unknown."""
        if self.in_flight:
            self.in_flight = False
            self.unknown()
        return self.usage


def finish(spend: RunUsage, stop_reason: str, detail: str,
           answer: Answer | None = None) -> EngineResult:
    """The run's result: what was spent so far, and the answer when there is one."""
    return EngineResult(
        usage=spend.final(), stop_reason=stop_reason,
        findings=answer.findings if answer else (),
        assessment=answer.assessment if answer else None,
        description=answer.description if answer else None,
        answer=answer.answer if answer else None,
        fixed=answer.fixed if answer else (), detail=detail)


def does_not_fit(spend: RunUsage, fitted: Fit, problem: str | None) -> EngineResult:
    """The result when a call would not fit what is left of the run or the model's window
    (see ``sizing``): the first call is ``refused`` at no cost; a repair is not made."""
    if problem is None:
        return replace(finish(spend, "refused", f"not sent: {fitted.explain()}"),
                       over_window=fitted.over_window)
    return finish(spend, "engine_error", f"invalid answer ({problem}); no repair: "
                                         f"{fitted.explain()}")


def over_window(spend: RunUsage, detail: str) -> EngineResult:
    """The server refused the prompt as longer than the model's context: nothing was
    read (a refused request is not billed)."""
    said = windows.stated_in_error(detail)
    window = f" of {said:,} tokens" if said else ""
    return replace(finish(spend, "refused", f"the prompt is over the model's context "
                                            f"window{window} ({detail})"), over_window=True)


def capped_answer(text: str) -> str:
    """A previous answer as a repair re-sends it: at most ``PREVIOUS_ANSWER_MAX_CHARS``."""
    if len(text) <= PREVIOUS_ANSWER_MAX_CHARS:
        return text
    return text[:PREVIOUS_ANSWER_MAX_CHARS] + "\n[… truncated]"


def call_failed(spend: RunUsage, failure: CallFailed) -> EngineResult:
    """The run's result after a call that produced no response."""
    if failure.billed_unknown:
        spend.unknown()
    return finish(spend, failure.stop_reason, failure.detail)


async def answer_with_one_repair(
    spend: RunUsage,
    request: EngineRequest,
    call: Callable[[str | None], Awaitable[Reply | EngineResult]],
    parse: Callable[[Reply], Answer],
    add_repair: Callable[[Reply, str], None],
) -> EngineResult:
    """Call, and read the answer; an invalid one is sent back once with what is wrong.

    ``call(problem)`` returns the model's reply, or the run's result when the call failed
    or would not fit what is left of the run (``problem`` is None for the first call, the
    objection for the repair). ``add_repair(reply, problem)`` extends the conversation
    with that reply and the objection. No repair is tried without tokens left for it.
    """
    reply = await call(None)
    if isinstance(reply, EngineResult):
        return reply
    try:
        return finish(spend, "completed", "", parse(reply))
    except InvalidAnswer as exc:
        problem = str(exc)
    if spend.usage.tokens is None or spend.usage.tokens >= request.max_run_tokens:
        return finish(spend, "engine_error",
                      f"invalid answer ({problem}); no tokens left to repair")
    add_repair(reply, problem)
    again = await call(problem)
    if isinstance(again, EngineResult):
        return again
    try:
        return finish(spend, "completed", "repaired once", parse(again))
    except InvalidAnswer as exc:
        return finish(spend, "engine_error", f"invalid answer after one repair: {exc}")


async def run_guarded(
    engine: str, model: str, request: EngineRequest,
    inner: Callable[[EngineRequest, RunUsage], Awaitable[EngineResult]],
) -> EngineResult:
    """Run ``inner`` under the request's wall clock; every outcome is a result.

    A bug in an adapter still ends in a settled run (``engine_error``, spend unknown), and
    a call still in flight at the wall clock ends as ``timeout`` with what was counted.
    """
    spend = RunUsage(engine, model)
    result: EngineResult | None = None
    try:
        with anyio.move_on_after(request.wall_clock_seconds):
            result = await inner(request, spend)
    except Exception:
        log.exception("engine adapter failed", extra={**request.log_extra, "engine": engine})
        spend.unknown()
        result = EngineResult(usage=spend.final(), stop_reason="engine_error",
                              detail=f"internal error in the {engine} adapter")
    if result is None:
        result = EngineResult(usage=spend.final(), stop_reason="timeout",
                              detail="the wall-clock limit passed during the API call")
    log.info("engine run finished: %s", result.stop_reason,
             extra={**request.log_extra, "engine": engine,
                    "stop_reason": result.stop_reason, "tokens": result.usage.tokens,
                    "confidence": result.usage.confidence, "detail": result.detail})
    return result
