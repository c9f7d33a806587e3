"""Rate-limit headers and the retry decision, as pure functions (sans-I/O).

The client feeds these the status, headers and error message of each response and the
current time; they answer "what is the limit now" and "wait how long, or give up". Nothing
here sleeps, reads a clock or touches the network, so every path is tested directly.

GitHub's rules (reference GITHUB-PLATFORM.md §6.4), in the order applied:

1. A 403/429 is a rate limit when ``x-ratelimit-remaining`` is ``0`` (primary), or when the
   message mentions a secondary rate limit or a ``retry-after`` header is present
   (secondary). Any other 403 is a permission problem, not a reason to wait.
2. Wait ``retry-after`` seconds if given; else, if remaining is ``0``, until
   ``x-ratelimit-reset``; else at least 60 s, doubling on each repeat.
3. Give up after a bounded number of waits, or at once when the wait is longer than a
   worker should hold its lease for (``RetryPolicy.max_wait``).

``x-ratelimit-reset`` and an HTTP-date ``Retry-After`` are instants on GitHub's clock, so
the ``now`` given to these functions is GitHub's (see ``github_clock``), not the host's.

Server errors and dropped connections are retried a bounded number of times with
exponential back-off and jitter (the random source is a parameter).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Literal

RateLimitKind = Literal["primary", "secondary"]

SECONDARY_FALLBACK_SECONDS = 60.0


@dataclass(frozen=True)
class RateLimit:
    """One ``x-ratelimit-*`` reading: the budget of one resource for one credential."""

    limit: int
    remaining: int
    used: int
    reset: datetime
    resource: str


@dataclass(frozen=True)
class RetryPolicy:
    """How patient the client is. The defaults suit a worker holding a 20-minute lease.

    ``rate_limit_retries``: waits allowed on 403/429 rate limits before ``RateLimited``.
    ``server_retries``: retries of 5xx and connection errors before ``ServerError``.
    ``backoff_base``/``backoff_cap``: seconds; attempt *n* waits up to base·2ⁿ (capped),
    jittered into [½, 1] of that. ``max_wait``: a single rate-limit wait longer than this
    is not slept through; ``RateLimited(until=...)`` is raised for the caller to reschedule.
    ``write_spacing``: the minimum gap between two writes of one installation.
    """

    rate_limit_retries: int = 3
    server_retries: int = 3
    backoff_base: float = 1.0
    backoff_cap: float = 30.0
    max_wait: timedelta = timedelta(minutes=15)
    write_spacing: timedelta = timedelta(seconds=1)

    def __post_init__(self) -> None:
        if self.rate_limit_retries < 0 or self.server_retries < 0:
            raise ValueError("retry counts must be >= 0")
        if self.backoff_base <= 0 or self.backoff_cap < self.backoff_base:
            raise ValueError("backoff_base must be > 0 and backoff_cap >= backoff_base")
        if self.write_spacing < timedelta(seconds=1):
            raise ValueError("write_spacing below 1 s invites GitHub's secondary limits")


def _header(headers: Mapping[str, str], name: str) -> str | None:
    # httpx.Headers is case-insensitive already; a plain dict from a test may not be.
    value = headers.get(name)
    if value is None:
        for key, candidate in headers.items():
            if key.lower() == name:
                return candidate
    return value


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def parse_rate_limit(headers: Mapping[str, str]) -> RateLimit | None:
    """The ``x-ratelimit-*`` headers as a ``RateLimit``, or ``None`` when absent/garbled."""
    limit = _int(_header(headers, "x-ratelimit-limit"))
    remaining = _int(_header(headers, "x-ratelimit-remaining"))
    reset = _int(_header(headers, "x-ratelimit-reset"))
    if limit is None or remaining is None or reset is None:
        return None
    used = _int(_header(headers, "x-ratelimit-used"))
    return RateLimit(
        limit=limit,
        remaining=remaining,
        used=used if used is not None else max(limit - remaining, 0),
        reset=datetime.fromtimestamp(reset, tz=UTC),
        resource=_header(headers, "x-ratelimit-resource") or "core",
    )


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """``Retry-After`` as seconds from ``now``: delta-seconds or an HTTP date."""
    if value is None:
        return None
    value = value.strip()
    seconds = _int(value)
    if seconds is not None:
        return float(max(seconds, 0))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now).total_seconds(), 0.0)


def classify_rate_limit(
    status: int, headers: Mapping[str, str], message: str
) -> RateLimitKind | None:
    """Which limit a 403/429 is, or ``None`` when it is not a rate limit at all."""
    if status not in (403, 429):
        return None
    if "secondary rate limit" in message.lower() or _header(headers, "retry-after") is not None:
        return "secondary"
    if _header(headers, "x-ratelimit-remaining") == "0":
        return "primary"
    if status == 429:
        return "secondary"
    return None


def rate_limit_wait(headers: Mapping[str, str], now: datetime, previous_waits: int) -> float:
    """Seconds to wait after a rate-limited response (rule 2 above).

    ``previous_waits`` is how many rate-limit waits this request already made; only the
    60 s fallback doubles with it, because ``retry-after`` and the reset time are GitHub's
    own answers and waiting longer than them gains nothing.
    """
    retry_after = parse_retry_after(_header(headers, "retry-after"), now)
    if retry_after is not None:
        return max(retry_after, 1.0)
    if _header(headers, "x-ratelimit-remaining") == "0":
        reset = _int(_header(headers, "x-ratelimit-reset"))
        if reset is not None:
            until = datetime.fromtimestamp(reset, tz=UTC)
            return max((until - now).total_seconds(), 1.0)
    return SECONDARY_FALLBACK_SECONDS * (2.0**previous_waits)


def backoff_delay(attempt: int, policy: RetryPolicy, rand: Callable[[], float]) -> float:
    """Jittered exponential back-off for retry ``attempt`` (0-based): [½, 1]·min(cap, base·2ⁿ)."""
    ceiling = min(policy.backoff_cap, policy.backoff_base * (2.0**attempt))
    return ceiling * (0.5 + 0.5 * min(max(rand(), 0.0), 1.0))


def resource_for_path(path: str) -> str:
    """The rate-limit resource a request draws on, for the pre-emptive check."""
    if path.startswith("/search/"):
        return "search"
    if path == "/graphql":
        return "graphql"
    return "core"
