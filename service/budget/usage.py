"""What a run cost, and why it ended: the record a reservation is settled with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, Literal

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
