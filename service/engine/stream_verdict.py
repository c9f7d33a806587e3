"""Judge one finished (or killed) ``claude -p`` process from its folded stream. Pure.

``classify`` turns a ``StreamState`` (stream_json.py) plus what the adapter saw (exit
code, why it killed the child, stderr's tail) into an ``Outcome``: a stop reason, a usage
figure with its confidence, the answer text. The CLI's exit code and stderr lie (exit 0
with an error result, exit 1 for everything, an empty stderr), so the decision is made
from the events; the exit code only colours the detail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from service.budget.usage import Confidence
from service.config.redact import redact_shapes
from service.engine.stream_json import StreamState

Abort = Literal["timeout", "tokens", "usage_limit"]

_TRUNCATED_SUBTYPES: Final = frozenset({"error_max_turns", "error_max_budget_usd"})
_TRUNCATED_TERMINALS: Final = frozenset({"max_turns", "budget_exhausted", "prompt_too_long"})
_FAILED_SUBTYPES: Final = frozenset({"error_during_execution",
                                     "error_max_structured_output_retries"})


@dataclass(frozen=True)
class Outcome:
    """The adapter-independent verdict on one ``claude -p`` process."""

    stop_reason: str
    tokens: int | None
    confidence: Confidence
    model: str | None
    answer: str | None  # the result text, only when the run completed
    cost_usd: float | None
    resets_at: datetime | None
    detail: str
    session_id: str | None
    turns: int | None


def classify(state: StreamState, *, exit_code: int | None, aborted: Abort | None,
             stderr_tail: str = "", unseen_output: int = 0) -> Outcome:
    """Decide the stop reason and usage of one finished (or killed) process.

    First match wins: credentials rejected → ``engine_unavailable``; a plan limit in any
    form → ``usage_limit``; killed at the wall clock → ``timeout``; killed for the token
    cap → ``truncated``; a refusal → ``refused``; max turns/budget/prompt too long, or an
    answer over the output maximum → ``truncated``; a clean success → ``completed``; an
    execution error → ``failed``; anything else (an error result, no result at all,
    garbage) → ``engine_error``.

    ``unseen_output`` is what a process that ended without its result (killed, or
    crashed) may have generated that no event showed — the block in progress, at most
    the call's output cap —; it is added to the estimate of such a run. Credentials
    rejected before any answer cost nothing.
    """
    tokens, confidence, model = _usage(state)
    result = state.result
    if result is None and confidence == "estimated" and tokens:
        tokens += unseen_output
    if state.auth_failure and result is None and not state.usage_seen:
        tokens, confidence = 0, "exact"  # the API refused the key: nothing was billed

    def outcome(stop_reason: str, detail: str, answer: str | None = None) -> Outcome:
        return Outcome(
            stop_reason=stop_reason, tokens=tokens, confidence=confidence, model=model,
            answer=answer, cost_usd=result.cost_usd if result else None,
            resets_at=state.plan_limit.resets_at if stop_reason == "usage_limit"
            and state.plan_limit else None,
            detail=detail, session_id=state.session_id,
            turns=result.num_turns if result else None,
        )

    if state.auth_failure:
        return outcome("engine_unavailable", f"claude cannot authenticate: {state.auth_failure}")
    if state.plan_limit is not None:
        kind = f" ({state.plan_limit.kind})" if state.plan_limit.kind else ""
        return outcome("usage_limit", f"plan usage limit reached{kind}, "
                                      f"reported by {state.plan_limit.source}")
    if aborted == "timeout":
        return outcome("timeout", "killed at the wall-clock limit" + _retrying(state))
    if aborted == "tokens":
        return outcome("truncated", f"aborted: {state.running_tokens} tokens used, past the "
                                    "run's token cap")
    if result is None:
        return outcome("engine_error", _no_result_detail(state, exit_code, stderr_tail))
    if state.refusal:
        return outcome("refused", "the model refused the request")
    if state.output_maximum and (result.is_error or result.subtype != "success"):
        return outcome("truncated", "the answer exceeded the output token maximum: "
                                    + _one_line(result.text, 100))
    if (result.subtype in _TRUNCATED_SUBTYPES or result.terminal_reason in _TRUNCATED_TERMINALS
            or result.text.strip() == "Prompt is too long"):
        return outcome("truncated", f"claude stopped early: {result.subtype}"
                                    + (f" ({result.terminal_reason})"
                                       if result.terminal_reason else ""))
    if result.subtype == "success" and not result.is_error:
        if result.stop_reason == "max_tokens":
            return outcome("truncated", "the final answer hit the output token limit")
        return outcome("completed", "", answer=result.text)
    if result.subtype in _FAILED_SUBTYPES:
        errors = "; ".join(result.errors)[:150]
        return outcome("failed", f"claude ended with {result.subtype}"
                                 + (f": {errors}" if errors else ""))
    status = f" (HTTP {result.api_error_status})" if result.api_error_status else ""
    text = _one_line(result.text, 120)
    return outcome("engine_error", f"claude reported an error{status}"
                                   + (f": {text}" if text else "")
                                   + (f", exit {exit_code}" if exit_code else ""))


def _usage(state: StreamState) -> tuple[int | None, Confidence, str | None]:
    result = state.result
    fallback_model = state.message_model or state.init_model
    if result is not None and result.exact_tokens is not None:
        return result.exact_tokens, "exact", result.model or fallback_model
    if state.usage_seen:
        loop = result.loop_tokens if result and result.loop_tokens else 0
        return max(state.running_tokens, loop), "estimated", fallback_model
    if result is not None and result.loop_tokens is not None:
        return result.loop_tokens, "estimated", fallback_model
    return None, "unavailable", fallback_model


def _retrying(state: StreamState) -> str:
    """What the CLI was retrying when the wall clock ended it, if that is all it did."""
    if not state.api_retries or state.usage_seen:
        return ""
    status, n = state.last_retry_status, state.api_retries
    if status is None:
        return f"; the API was unreachable ({n} retries)"
    if status == 429:
        return f"; the API kept answering 429, rate limited ({n} retries)"
    return f"; the API kept answering HTTP {status} ({n} retries)"


def _no_result_detail(state: StreamState, exit_code: int | None, stderr_tail: str) -> str:
    code = "killed" if exit_code is None else f"exit {exit_code}"
    if state.lines == 0:
        err = _one_line(stderr_tail, 150)
        return f"claude printed nothing ({code})" + (f": {err}" if err else "")
    if state.lines == state.unparsed:
        return f"claude printed {state.lines} unparseable lines and no result ({code})"
    if state.transient_error:
        return f"{state.transient_error}; no result event ({code})"
    return f"claude ended without a result event ({code}, {state.lines} lines)"


def _one_line(text: str, limit: int) -> str:
    """A short, single-line, secret-free excerpt for a detail string."""
    flat = " ".join(redact_shapes(text)[0].split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
