"""Why the governor did not admit a candidate, and what it tells the process's metrics."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from service.budget.ladder import Mode

RefusalReason = Literal["disabled", "exhausted", "mention_only", "insufficient", "breaker",
                        "per_actor", "per_installation", "repository", "pacer",
                        "monthly_usd"]


@dataclass(frozen=True)
class Refusal:
    """Why a candidate was not admitted: enough for the notice to the person who asked."""

    dedupe_key: str
    reason: RefusalReason
    mode: Mode
    window: str | None         # which window refused ("monthly" for dollars), if any
    frees_at: datetime | None  # when that refusal can lift (a charge ages out, a reset)
    at: datetime


class AdmissionCounter(Protocol):
    """What the governor tells the process's metrics
    (``service.observe.metrics.instruments.Metrics``)."""

    def admitted(self, rung: str) -> None: ...

    def refused(self, rung: str, reason: str) -> None: ...
