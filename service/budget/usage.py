"""What a run cost, and why it ended: the record a reservation is settled with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from service.storage.ledger import Settlement

Confidence = Literal["exact", "estimated", "unavailable"]
CONFIDENCES: Final = ("exact", "estimated", "unavailable")

#: Why a run ended: one of eleven, so ``GROUP BY stop_reason`` means something.
STOP_REASONS: Final = (
    "completed", "truncated", "failed", "timeout", "engine_error", "engine_unavailable",
    "refused", "closed", "lost", "infrastructure", "usage_limit",
)


@dataclass(frozen=True)
class Usage:
    """What a run cost and how far that can be trusted: one answer, one record.

    ``tokens`` is None only with confidence ``unavailable``: nothing could be read, so
    the ledger keeps the full reservation charged. ``cost_usd`` is the dollar cost the
    engine reported (Claude Code's ``total_cost_usd``), None when it reported none; the
    monthly dollar window then charges the run at the estimated rate instead.
    """

    tokens: int | None
    confidence: Confidence
    engine: str | None
    model: str | None
    cost_usd: float | None = None

    def __post_init__(self) -> None:
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"confidence must be one of {CONFIDENCES}, got {self.confidence!r}")
        if self.tokens is None and self.confidence != "unavailable":
            raise ValueError("tokens may be None only when confidence is 'unavailable'")
        if self.tokens is not None and (isinstance(self.tokens, bool) or self.tokens < 0):
            raise ValueError("tokens must be a non-negative integer")
        if self.cost_usd is not None and (
                isinstance(self.cost_usd, bool) or not isinstance(self.cost_usd, int | float)
                or not math.isfinite(self.cost_usd) or self.cost_usd < 0):
            raise ValueError("cost_usd must be a finite, non-negative number of dollars")


def settlement_of(usage: Usage, *, stop_reason: str, reviewed_lines: int | None,
                  reviewed_since: str | None, resets_at: datetime | None,
                  estimated_tokens: int | None = None) -> Settlement:
    """The ledger's record of a run that cost ``usage`` and ended for ``stop_reason``.

    ``resets_at`` (when a plan limit lifts) belongs only to ``usage_limit`` and must be
    aware; anything else is a caller's mistake, refused with ``ValueError``.
    """
    if stop_reason not in STOP_REASONS:
        raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {stop_reason!r}")
    if resets_at is not None and stop_reason != "usage_limit":
        raise ValueError("resets_at is only meaningful with stop_reason 'usage_limit'")
    if resets_at is not None and (resets_at.tzinfo is None or resets_at.utcoffset() is None):
        raise ValueError(f"resets_at must be timezone-aware, got {resets_at.isoformat()}")
    return Settlement(
        tokens=usage.tokens, confidence=usage.confidence, engine=usage.engine,
        model=usage.model, stop_reason=stop_reason, reviewed_lines=reviewed_lines,
        reviewed_since=reviewed_since,
        cost_usd=None if usage.cost_usd is None else float(usage.cost_usd),
        estimated_tokens=estimated_tokens)
