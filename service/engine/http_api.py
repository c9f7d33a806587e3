"""What the two HTTP engines share: one POST with bounded retries, and error reading.

Retries follow the servers' own advice: 408/409/429/5xx/529 and connection failures are
retried up to ``max_retries`` times, waiting ``retry-after-ms`` / ``retry-after``
(seconds or an HTTP date) when the server gives one and a capped exponential backoff
otherwise. A server asking for a longer wait than ``max_retry_wait`` is not waited
for: the run ends instead, because a review that sleeps for minutes holds a worker and
a reservation for nothing. ``sleep`` is injectable so tests do not wait.

A rejected request is not billed, so failures report usage ``exact`` 0; only a call
that may have been processed (a timeout, a dropped connection mid-response) leaves its
usage unknown.
"""

from __future__ import annotations

import email.utils
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

import anyio
import httpx

from service.budget import Usage
from service.engine.base import (
    EngineRequest,
    EngineResult,
    combine_usage,
    no_usage,
    unknown_usage,
)
from service.engine.findings import Answer, InvalidAnswer

log = logging.getLogger(__name__)

RETRY_STATUSES: Final = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_BACKOFF_SECONDS: Final = 8.0

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


def error_text(response: httpx.Response, limit: int = 160) -> str:
    """The ``error.message`` (and type) of an API error body, one line, capped."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return f"HTTP {response.status_code}"
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        kind = error.get("type") or error.get("code") or ""
        message = str(error.get("message") or "")
        text = f"{kind}: {message}" if kind else message
    elif isinstance(error, str):
        text = error
    else:
        text = ""
    flat = " ".join(text.split())
    flat = flat if len(flat) <= limit else flat[: limit - 1] + "…"
    return f"HTTP {response.status_code}" + (f" {flat}" if flat else "")


def error_body(response: httpx.Response) -> dict[str, Any]:
    """The decoded ``error`` object of an error response, or an empty dict."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


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
) -> httpx.Response | CallFailed:
    """POST ``body`` as JSON; return the final response (any status, retries spent) or a
    ``CallFailed`` for a transport failure. ``give_up`` marks responses never retried."""
    content = json.dumps(body).encode()
    send_headers = {**headers, "content-type": "application/json"}
    attempt = 0
    while True:
        try:
            response = await client.post(url, content=content, headers=send_headers)
        except httpx.TimeoutException:
            return CallFailed("timeout", "the request timed out", billed_unknown=True)
        except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
            if attempt >= max_retries or isinstance(exc, httpx.UnsupportedProtocol):
                return CallFailed("engine_unavailable",
                                  f"cannot connect to the engine's server ({type(exc).__name__})")
            wait = None
        except httpx.TransportError as exc:  # dropped mid-response: may have been processed
            return CallFailed("engine_error", f"connection failed: {type(exc).__name__}",
                              billed_unknown=True)
        else:
            if response.status_code not in RETRY_STATUSES or give_up(response) \
                    or attempt >= max_retries:
                return response
            wait = retry_after_seconds(response.headers, clock())
            if wait is not None and wait > max_retry_wait:
                return response  # asked to wait longer than a run may; report it instead
        delay = wait if wait is not None else min(0.5 * 2 ** attempt, MAX_BACKOFF_SECONDS)
        attempt += 1
        log.info("engine request retry %d in %.1f s", attempt, delay,
                 extra={**(log_extra or {}), "attempt": attempt})
        await sleep(delay)


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
        detail=detail)


def call_failed(spend: RunUsage, failure: CallFailed) -> EngineResult:
    """The run's result after a call that produced no response."""
    if failure.billed_unknown:
        spend.unknown()
    return finish(spend, failure.stop_reason, failure.detail)


async def answer_with_one_repair(
    spend: RunUsage,
    request: EngineRequest,
    call: Callable[[], Awaitable[Reply | EngineResult]],
    parse: Callable[[Reply], Answer],
    add_repair: Callable[[Reply, str], None],
) -> EngineResult:
    """Call, and read the answer; an invalid one is sent back once with what is wrong.

    ``call`` returns the model's reply, or the run's result when the call failed;
    ``add_repair(reply, problem)`` extends the conversation with that reply and the
    objection, for the second call. No repair is tried without tokens left to pay for it.
    """
    reply = await call()
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
    again = await call()
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
