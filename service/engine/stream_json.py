"""Claude Code's ``--output-format stream-json`` events, folded into aggregates. Pure.

``StreamState.feed`` takes one stdout line at a time and keeps only aggregates (never
the transcript), so memory stays bounded whatever the child prints; stream_verdict.py
judges the folded state once the process has ended.

Usage is *exact* from the result's ``modelUsage`` (cumulative over every model the CLI
called), *estimated* from what the ``assistant`` events show, and *unavailable* when
neither was seen.

The estimate needs care: an ``assistant`` event (one per content block, repeating the
message's id) carries the usage of its API call *as of the start of the stream* — the
input and cache tokens are right, ``output_tokens`` is 1. So a message's output is
estimated from the content the events carry, at ``BYTES_PER_TOKEN`` bytes of UTF-8 a
token, each block counted once; the true figure arrives only with the ``result``.
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Literal

from service.engine.limits import (
    USAGE_LIMIT_PREFIXES,
    epoch_time,
    is_auth_failure_text,
    is_usage_limit_text,
    reset_time,
)

_AUTH_ERRORS: Final = frozenset({"authentication_failed", "oauth_org_not_allowed",
                                 "account_on_hold"})
_REFUSAL_TEXT: Final = "appears to violate our Usage Policy"

#: How many distinct message ids are deduplicated exactly; older ones are folded into
#: a running total (the CLI repeats a message's events back to back, so this is plenty).
_DEDUPE_WINDOW: Final = 512
_TEXT_PROBE: Final = 600  # how much of a message's text is kept for matching
#: Output is estimated at one token per this many bytes of streamed content. Claude's
#: tokens average about 4 bytes of English and 3 of code; 3 leans towards charging more.
BYTES_PER_TOKEN: Final = 3
_OUTPUT_MAXIMUM: Final = "output token maximum"
#: ``claude-opus-4-8[1m]`` (the init event, ``modelUsage``) and ``claude-opus-4-8`` (each
#: message) are one model: the suffix names the context window.
_MODEL_SUFFIX: Final = re.compile(r"\[[^\]]*\]$")


def model_name(model: str | None) -> str | None:
    """One name for a model, without the CLI's context-window suffix."""
    return _MODEL_SUFFIX.sub("", model) or None if model else None


_INPUT_KEYS: Final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def message_tokens(usage: Any) -> int | None:
    """input + output + cache creation + cache read of one API call's ``usage``."""
    if not isinstance(usage, dict):
        return None
    keys = (*_INPUT_KEYS, "output_tokens")
    if not any(isinstance(usage.get(k), int) and not isinstance(usage.get(k), bool)
               for k in keys):
        return None
    return sum(_count(usage.get(k)) for k in keys)


@dataclass
class _Message:
    """One API call as its ``assistant`` events show it (see the module docstring)."""

    input_tokens: int
    reported_output: int
    content_bytes: int = 0
    blocks: set[int] = field(default_factory=set)

    @property
    def tokens(self) -> int:
        streamed = -(-self.content_bytes // BYTES_PER_TOKEN)
        return self.input_tokens + max(self.reported_output, streamed)

    def add_blocks(self, content: Any) -> None:
        if not isinstance(content, list):
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            encoded = json.dumps(block, sort_keys=True, ensure_ascii=False).encode()
            fingerprint = hash(encoded)
            if fingerprint not in self.blocks:  # each block once, however often repeated
                self.blocks.add(fingerprint)
                self.content_bytes += _content_bytes(block, len(encoded))


def _content_bytes(block: dict[str, Any], encoded: int) -> int:
    """The bytes the model generated for one block: its text, or a tool call's input."""
    kind = block.get("type")
    if kind == "text":
        return len(str(block.get("text", "")).encode())
    if kind == "thinking":
        return len(str(block.get("thinking", "")).encode())
    if kind == "tool_use":
        return len(json.dumps(block.get("input", {}), ensure_ascii=False).encode()) + 16
    return encoded


def model_usage_tokens(model_usage: Any) -> tuple[int, str | None] | None:
    """The run total from ``modelUsage`` (summed over models) and its dominant model."""
    if not isinstance(model_usage, dict):
        return None
    total, best, best_tokens = 0, None, -1
    for model, entry in model_usage.items():
        if not isinstance(entry, dict):
            continue
        tokens = sum(v for k in ("inputTokens", "outputTokens", "cacheReadInputTokens",
                                 "cacheCreationInputTokens")
                     if isinstance(v := entry.get(k), int) and not isinstance(v, bool) and v > 0)
        total += tokens
        if tokens > best_tokens:
            best, best_tokens = str(model), tokens
    return total, best


@dataclass(frozen=True)
class PlanLimit:
    """A plan limit the stream reported, and when it resets (if it said)."""

    source: Literal["rate_limit_event", "assistant", "result"]
    resets_at: datetime | None
    kind: str | None = None


@dataclass(frozen=True)
class ResultEvent:
    """The fields of the final ``result`` envelope the adapter uses."""

    subtype: str
    is_error: bool
    text: str
    api_error_status: int | None
    stop_reason: str | None
    terminal_reason: str | None
    num_turns: int | None
    cost_usd: float | None
    exact_tokens: int | None  # from modelUsage; None when it is absent
    model: str | None
    loop_tokens: int | None   # the main-loop-only ``usage``
    errors: tuple[str, ...]


@dataclass
class StreamState:
    """What has been learnt from the stream so far. Feed it lines in order."""

    now: datetime
    lines: int = 0
    unparsed: int = 0
    oversized: int = 0
    session_id: str | None = None
    init_model: str | None = None
    api_key_source: str | None = None
    assistant_events: int = 0
    api_retries: int = 0
    last_retry_status: int | None = None
    plan_limit: PlanLimit | None = None
    auth_failure: str | None = None
    refusal: bool = False
    transient_error: str | None = None
    message_model: str | None = None
    result: ResultEvent | None = None
    output_maximum: bool = False
    _per_message: OrderedDict[str, _Message] = field(default_factory=OrderedDict)
    _folded_tokens: int = 0
    _usage_seen: bool = False

    def feed(self, line: bytes | str) -> None:
        """Fold one line (without or with its trailing newline) into the state."""
        self.lines += 1
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # not JSON, bad UTF-8, absurd nesting
            self.unparsed += 1
            return
        if not isinstance(event, dict):
            self.unparsed += 1
            return
        kind = event.get("type")
        if kind == "system":
            self._system(event)
        elif kind == "assistant":
            self._assistant(event)
        elif kind == "rate_limit_event":
            self._rate_limit(event.get("rate_limit_info"))
        elif kind == "result":
            self._result(event)

    @property
    def running_tokens(self) -> int:
        """The in-run estimate: every message's input and cache tokens as reported, and
        its output from the content streamed (see the module docstring)."""
        return self._folded_tokens + sum(m.tokens for m in self._per_message.values())

    @property
    def usage_seen(self) -> bool:
        return self._usage_seen

    @property
    def terminal(self) -> bool:
        """The CLI has said its last word (a result, or a rejected plan limit)."""
        return self.result is not None or (
            self.plan_limit is not None and self.plan_limit.source == "rate_limit_event")

    def _system(self, event: dict[str, Any]) -> None:
        subtype = event.get("subtype")
        if subtype == "init":
            self.session_id = _str(event.get("session_id")) or self.session_id
            self.init_model = model_name(_str(event.get("model")))
            self.api_key_source = _str(event.get("apiKeySource"))
        elif subtype == "api_retry":
            self.api_retries += 1
            status = event.get("error_status")
            self.last_retry_status = status if isinstance(status, int) else None
            if event.get("error") == "authentication_failed" or status in (401, 403):
                self.auth_failure = "the API rejected the credentials"

    def _assistant(self, event: dict[str, Any]) -> None:
        self.assistant_events += 1
        message = event.get("message")
        if not isinstance(message, dict):
            return
        self.session_id = _str(event.get("session_id")) or self.session_id
        model = _str(message.get("model"))
        if model and model != "<synthetic>":
            self.message_model = model_name(model)
        usage = message.get("usage")
        if message_tokens(usage) is not None and model != "<synthetic>":
            assert isinstance(usage, dict)
            self._usage_seen = True
            key = _str(message.get("id")) or f"anonymous-{self.assistant_events}"
            seen = self._per_message.get(key)
            if seen is None:
                seen = _Message(sum(_count(usage.get(k)) for k in _INPUT_KEYS),
                                _count(usage.get("output_tokens")))
                self._per_message[key] = seen
            else:
                seen.reported_output = max(seen.reported_output,
                                           _count(usage.get("output_tokens")))
            seen.add_blocks(message.get("content"))
            self._per_message.move_to_end(key)
            while len(self._per_message) > _DEDUPE_WINDOW:
                self._folded_tokens += self._per_message.popitem(last=False)[1].tokens
        text = _message_text(message)
        error = _str(event.get("error"))
        if message.get("stop_reason") == "refusal" or _REFUSAL_TEXT in text:
            self.refusal = True
        if error in _AUTH_ERRORS:
            self.auth_failure = f"the CLI reported {error}"
        elif error == "billing_error":
            # "Credit balance is too low" (2.1.197, an API key out of credit): a limit
            # with no reset time, as the HTTP engines read the same 400.
            self._limit(PlanLimit("assistant", None, "credit"))
        elif error == "max_output_tokens" or _OUTPUT_MAXIMUM in text:
            self.output_maximum = True
        elif error == "rate_limit" or event.get("api_error_status") == 429:
            info = event.get("api_error_params")
            limit_info = info.get("rate_limit_info") if isinstance(info, dict) else None
            if is_usage_limit_text(text) or event.get("api_error") == "usage_limit_reached":
                resets = _resets_from_info(limit_info) or reset_time(text, self.now)
                self._limit(PlanLimit("assistant", resets, _kind(limit_info)))
            else:
                self.transient_error = "the API rate-limited the request (transient 429)"
        elif error:
            self.transient_error = f"the CLI reported {error}"

    def _rate_limit(self, info: Any) -> None:
        if isinstance(info, dict) and info.get("status") == "rejected":
            self._limit(PlanLimit("rate_limit_event", _resets_from_info(info), _kind(info)))

    def _limit(self, limit: PlanLimit) -> None:
        # Keep the first report, but learn a reset time from a later one if it had none.
        if self.plan_limit is None:
            self.plan_limit = limit
        elif self.plan_limit.resets_at is None and limit.resets_at is not None:
            self.plan_limit = PlanLimit(self.plan_limit.source, limit.resets_at,
                                        self.plan_limit.kind or limit.kind)

    def _result(self, event: dict[str, Any]) -> None:
        exact = model_usage_tokens(event.get("modelUsage"))
        text = event.get("result")
        text = text if isinstance(text, str) else ""
        status = event.get("api_error_status")
        cost = event.get("total_cost_usd")
        turns = event.get("num_turns")
        errors = event.get("errors")
        self.session_id = _str(event.get("session_id")) or self.session_id
        self.result = ResultEvent(
            subtype=_str(event.get("subtype")) or "",
            is_error=event.get("is_error") is True,
            text=text,
            api_error_status=status if isinstance(status, int) else None,
            stop_reason=_str(event.get("stop_reason")),
            terminal_reason=_str(event.get("terminal_reason")),
            num_turns=turns if isinstance(turns, int) else None,
            cost_usd=float(cost) if isinstance(cost, int | float)
            and not isinstance(cost, bool) and math.isfinite(cost) else None,
            exact_tokens=exact[0] if exact else None,
            model=model_name(exact[1]) if exact else None,
            loop_tokens=message_tokens(event.get("usage")),
            errors=tuple(str(e)[:200] for e in errors) if isinstance(errors, list) else (),
        )
        # An error result is matched on its text; a "successful" one only when it opens
        # with a limit banner (older CLIs printed the banner with is_error false).
        if (is_usage_limit_text(text) if self.result.is_error or status == 429
                else text.strip().startswith(USAGE_LIMIT_PREFIXES)):
            self._limit(PlanLimit("result", reset_time(text, self.now)))
        if self.result.is_error and is_auth_failure_text(text):
            self.auth_failure = self.auth_failure or "the CLI is not authenticated"
        if self.result.is_error and status in (401, 403):
            self.auth_failure = self.auth_failure or f"the API answered {status}"
        if self.result.stop_reason == "refusal" or (
                self.result.is_error and _REFUSAL_TEXT in text[:_TEXT_PROBE]):
            self.refusal = True
        if self.result.is_error and _OUTPUT_MAXIMUM in text[:_TEXT_PROBE]:
            self.output_maximum = True


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content[:_TEXT_PROBE]
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", ""))[:_TEXT_PROBE])
    return "\n".join(parts)[:_TEXT_PROBE]


def _resets_from_info(info: Any) -> datetime | None:
    if not isinstance(info, dict):
        return None
    value = info.get("resetsAt")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return epoch_time(value)
    return None


def _kind(info: Any) -> str | None:
    return _str(info.get("rateLimitType")) if isinstance(info, dict) else None

