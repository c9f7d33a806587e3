"""Recognising Claude's plan-limit and authentication messages, and when a limit resets.

Pure. The CLI reports a plan limit in several forms over its versions (a structured
``rate_limit_event``, a synthetic assistant message, a result text); the structured
forms are handled in ``stream_json``, the texts here. A transient server 429 ("API
Error: Rate limit reached") matches none of these and is not a plan limit.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_TEXT_PROBE: Final = 600  # limit banners are short; never scan a whole answer

#: Text that opens a plan-limit message (the SDK's USAGE_LIMIT_ERROR_PREFIXES, plus the
#: older CLI wordings). A transient server 429 ("API Error: Rate limit reached") starts
#: with none of them and is an engine error, not a plan limit.
USAGE_LIMIT_PREFIXES: Final = (
    "You've hit your", "You've reached your", "You're out of usage credits",
    "Your org is out of usage", "Your seat type doesn't include usage",
    "Your seat type doesn't include extra usage", "Your usage allocation has been disabled",
    "Your group's usage limit is set to $0", "You're out of extra usage",
    "Claude AI usage limit reached", "Claude usage limit reached",
)
_LIMIT_PATTERNS: Final = (
    re.compile(r"usage limit reached", re.IGNORECASE),
    re.compile(r"limit reached\s*[∙·•]\s*resets", re.IGNORECASE),
    # An API key's prepaid credit has run out: a limit like the plan's, with no reset
    # time (the HTTP engines read the same 400 the same way).
    re.compile(r"credit balance is too low", re.IGNORECASE),
)
_AUTH_TEXTS: Final = (
    "Not logged in", "Invalid API key", "Failed to authenticate", "Please run /login",
    "authentication_error", "OAuth session expired", "Invalid bearer token",
)
_EPOCH_IN_TEXT = re.compile(r"\|\s*(\d{9,13})\b")
_CLOCK_IN_TEXT = re.compile(
    r"resets?\s+(?:at\s+)?(\d{1,2})(?::(\d{2}))?\s*([ap]m)\s*\(([^)\s]+)\)", re.IGNORECASE)



def is_usage_limit_text(text: str) -> bool:
    """True when ``text`` is a plan-limit message in one of its known wordings."""
    head = text.strip()[:_TEXT_PROBE]
    return head.startswith(USAGE_LIMIT_PREFIXES) or any(p.search(head) for p in _LIMIT_PATTERNS)


def is_auth_failure_text(text: str) -> bool:
    """True when ``text`` says the CLI's credentials were missing or rejected."""
    head = text.strip()[:_TEXT_PROBE]
    return any(marker in head for marker in _AUTH_TEXTS)


def reset_time(text: str, now: datetime) -> datetime | None:
    """The reset instant a limit text names: ``…|<epoch>``, or ``resets 2am (Europe/Berlin)``
    (the next such wall-clock time after ``now``). None when it names none we can place."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    match = _EPOCH_IN_TEXT.search(text)
    if match:
        return epoch_time(int(match.group(1)))
    match = _CLOCK_IN_TEXT.search(text)
    if not match:
        return None
    hour, minute = int(match.group(1)) % 12, int(match.group(2) or 0)
    hour += 12 if match.group(3).lower() == "pm" else 0
    try:
        zone = ZoneInfo(match.group(4))
    except (ZoneInfoNotFoundError, ValueError):
        return None
    if minute > 59:
        return None
    local_now = now.astimezone(zone)
    candidate = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate <= local_now:
        candidate += timedelta(days=1)
    return candidate.astimezone(UTC)


def epoch_time(value: float) -> datetime | None:
    """A Unix timestamp (seconds, or milliseconds when implausibly large) as aware UTC."""
    if value <= 0:
        return None
    seconds = value / 1000 if value > 1e11 else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None
