"""What ``GET /budget`` and ``pr-review-agent budget`` show: one frozen picture at ``now``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from service.budget.dollars import DollarWindow, costs_since, usd
from service.budget.ladder import Mode, mode_for
from service.budget.policy import DisagreementLog
from service.budget.view import read_view
from service.budget.windows import WINDOWS, WindowState, tightest
from service.config.schema import BudgetConfig
from service.storage import ledger_windows
from service.storage.database import Transaction


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


@dataclass(frozen=True)
class BreakerView:
    """The circuit breaker at the snapshot's instant."""

    tripped: bool = False
    tripped_until: datetime | None = None
    calibrated_pct: int = 100
    effective_pct: int = 100
    last_trip_at: datetime | None = None
    trips_remembered: int = 0

    def as_json(self) -> dict[str, object]:
        return {
            "tripped": self.tripped, "tripped_until": _iso(self.tripped_until),
            "calibrated_pct": self.calibrated_pct, "effective_pct": self.effective_pct,
            "last_trip_at": _iso(self.last_trip_at), "trips_remembered": self.trips_remembered,
        }


@dataclass(frozen=True)
class PolicyView:
    """The shared policy row as this process reads it (all None: none published yet)."""

    authority: str | None = None
    written_at: datetime | None = None
    overrides_local: bool = False
    error: str | None = None

    def as_json(self) -> dict[str, object]:
        return {"authority": self.authority, "written_at": _iso(self.written_at),
                "overrides_local": self.overrides_local, "error": self.error}


@dataclass(frozen=True)
class Snapshot:
    """What ``GET /budget`` and ``pr-review-agent budget`` show.

    ``enabled`` and ``max_run_tokens`` are the values in force (the shared policy's when
    one is published); ``windows`` carry the effective (calibrated) limits.
    """

    now: datetime
    enabled: bool
    mode: Mode
    tightest: str
    max_run_tokens: int
    windows: tuple[WindowState, ...]
    breaker: BreakerView = field(default_factory=BreakerView)
    per_actor_pct: int = 100
    per_installation_pct: int = 100
    repository_reviews_per_day: tuple[tuple[str, int], ...] = ()
    #: ``(installation id or None, charge in each window)``, highest weekly charge first.
    installations: tuple[tuple[int | None, tuple[int, ...]], ...] = ()
    max_reviews_per_pr: int = 5
    policy: PolicyView = field(default_factory=PolicyView)
    window_usd: Mapping[str, int] = field(default_factory=dict)  # reported, micro-dollars
    monthly: DollarWindow | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "now": _iso(self.now),
            "enabled": self.enabled,
            "mode": self.mode.value,
            "tightest": self.tightest,
            "max_run_tokens": self.max_run_tokens,
            "windows": [
                {
                    "name": w.name, "duration_seconds": w.duration_seconds, "limit": w.limit,
                    "spent": w.spent, "reserved": w.reserved, "remaining": w.remaining,
                    "utilisation": w.utilisation, "frees_at": _iso(w.frees_at),
                    "configured_limit": (w.limit if w.configured_limit is None
                                         else w.configured_limit),
                    "spent_usd": usd(self.window_usd.get(w.name, 0)),
                }
                for w in self.windows
            ],
            "breaker": self.breaker.as_json(),
            "per_actor_pct": self.per_actor_pct,
            "per_installation_pct": self.per_installation_pct,
            "repository_reviews_per_day": dict(self.repository_reviews_per_day),
            "installations": [
                {"installation_id": inst,
                 "windows": {w.name: {"charged": charged,
                                      "cap": (None if self.per_installation_pct == 100
                                              else w.limit * self.per_installation_pct // 100)}
                             for w, charged in zip(self.windows, charges, strict=True)}}
                for inst, charges in self.installations
            ],
            "max_reviews_per_pr": self.max_reviews_per_pr,
            "policy": self.policy.as_json(),
            "monthly": None if self.monthly is None else self.monthly.as_json(),
        }


def read_snapshot(tx: Transaction, now: datetime, local: BudgetConfig,
                  disagreements: DisagreementLog) -> Snapshot:
    """Everything that decides, as the next claim at ``now`` would see it, read in ``tx``;
    ``local`` is this process's config (the shared policy, where one is stored, wins)."""
    view = read_view(tx, now, local, dollars=True)
    disagreements.note(view.policy, local)
    window_usd = {w.name: costs_since(tx, now - w.duration).micro_usd for w in WINDOWS}
    spend = ledger_windows.installation_spend(tx, [(w.name, now - w.duration) for w in WINDOWS])
    config, breaker, policy = view.config, view.breaker, view.policy
    tripped = breaker.tripped(now)
    mode = (Mode.EXHAUSTED if not config.enabled or tripped
            else mode_for(view.gauges))
    return Snapshot(
        now=now, enabled=config.enabled, mode=mode, tightest=tightest(view.windows).name,
        max_run_tokens=config.max_run_tokens, windows=view.windows,
        breaker=BreakerView(
            tripped=tripped, tripped_until=breaker.tripped_until,
            calibrated_pct=breaker.calibrated_pct, effective_pct=view.pct,
            last_trip_at=breaker.last_trip_at,
            trips_remembered=breaker.trips_within_memory(now)),
        per_actor_pct=config.per_actor_pct,
        per_installation_pct=config.per_installation_pct,
        repository_reviews_per_day=config.repository_reviews_per_day,
        installations=tuple((inst, tuple(charges)) for inst, charges in spend),
        max_reviews_per_pr=config.max_reviews_per_pr,
        policy=PolicyView() if policy is None else PolicyView(
            authority=policy.authority, written_at=policy.written_at,
            overrides_local=policy.overrides(local), error=policy.error),
        window_usd=window_usd, monthly=view.dollars,
    )
