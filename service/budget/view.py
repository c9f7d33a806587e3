"""What every budget decision reads, read once: the view of the store at one instant."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from service.budget.breaker import BreakerState, read_breaker
from service.budget.dollars import MONTHLY, DollarWindow, measure_dollars
from service.budget.ladder import Gauge, Mode
from service.budget.policy import Policy, read_policy
from service.budget.refusal import Refusal, RefusalReason
from service.budget.windows import WindowState, measure
from service.config.schema import BudgetConfig
from service.storage.database import Transaction


@dataclass(frozen=True)
class View:
    """Everything an admit reads before it looks at the candidate."""

    config: BudgetConfig       # this process's config, the shared policy applied
    policy: Policy | None
    breaker: BreakerState
    pct: int                   # the calibration in force
    windows: tuple[WindowState, ...]  # at their effective (calibrated) limits
    dollars: DollarWindow | None      # measured only when asked for

    @property
    def gauges(self) -> tuple[Gauge, ...]:
        """What the ladder reads: the token windows, and the dollar window when capped."""
        dollars = self.dollars
        if dollars is None or dollars.limit_micro is None:
            return self.windows
        return (*self.windows, dollars)


def read_view(conn: Transaction, now: datetime, local: BudgetConfig, *,
              dollars: bool) -> View:
    """The view at ``now`` through ``conn``: policy row, breaker, windows, and (when
    ``dollars``) the dollar window. Indexed reads only; nothing here grows with the ledger."""
    policy = read_policy(conn)
    config = local if policy is None else policy.apply(local)
    breaker = read_breaker(conn)
    pct = breaker.effective_pct(now)
    return View(
        config=config, policy=policy, breaker=breaker, pct=pct,
        windows=measure(conn, now, config, pct),
        dollars=measure_dollars(conn, now, config) if dollars else None,
    )


def refusal_at(dedupe_key: str, reason: RefusalReason, mode: Mode, gauge: Gauge | None, *,
               view: View, now: datetime) -> Refusal:
    """A refusal at the rung ``gauge`` put the ladder on, naming that gauge's window."""
    window: str | None = None
    frees_at: datetime | None = None
    if gauge is not None and gauge.name == MONTHLY and view.dollars is not None:
        reason = "monthly_usd" if reason == "exhausted" else reason
        window, frees_at = MONTHLY, view.dollars.frees_at
    elif gauge is not None:
        found = next(w for w in view.windows if w.name == gauge.name)
        window, frees_at = found.name, found.frees_at
    return Refusal(dedupe_key=dedupe_key, reason=reason, mode=mode, window=window,
                   frees_at=frees_at, at=now)
