"""Dollars: what runs cost as the engine reported it, and the optional monthly cap.

Claude Code's headless runs draw on a monthly dollar credit (ENGINE-FACTS.md §2.1), so
tokens are not the only thing that runs out. Each settled run stores the cost its engine
reported (``ledger.cost_usd``; NULL when it reported none). ``budget.monthly_usd`` then
caps a trailing 30-day window in dollars, enforced like a token window:

- ``spent``: the reported cost of the runs reserved in the window;
- ``unpriced``: settled runs with no reported cost (a crashed run, an engine that does
  not report cost), charged at the estimated rate rather than as free;
- ``reserved``: open reservations, each at the estimated cost of a whole run.

The rate is the observed one (reported dollars ÷ their tokens over the window) once at
least ``MIN_PRICED_RUNS`` runs reported a cost, and ``DEFAULT_USD_PER_MILLION_TOKENS``
until then. Money is counted in whole micro-dollars, so comparisons are exact integers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from service.config.checks import DEFAULT_USD_PER_MILLION_TOKENS
from service.config.schema import BudgetConfig
from service.storage import ledger_windows
from service.storage.database import Transaction

MONTH: Final = timedelta(days=30)
MIN_PRICED_RUNS: Final = 5
MICRO: Final = 1_000_000
MONTHLY: Final = "monthly"

@dataclass(frozen=True)
class Costs:
    """Reported costs of the runs reserved after some instant."""

    micro_usd: int
    tokens: int   # the tokens those runs were charged
    runs: int


def costs_since(conn: Transaction, start: datetime) -> Costs:
    m, t, r = ledger_windows.costs_since(conn, start)
    return Costs(micro_usd=m, tokens=t, runs=r)


def usd(micro: int) -> float:
    """Micro-dollars as dollars, for display."""
    return round(micro / MICRO, 6)


@dataclass(frozen=True)
class Rate:
    """Dollars per token, as the fraction ``micro_usd / tokens`` (exact, no float)."""

    micro_usd: int
    tokens: int
    observed: bool   # False: the documented default, too few priced runs yet
    runs: int        # priced runs it was fitted on

    def cost_of(self, tokens: int) -> int:
        """What ``tokens`` cost at this rate, in micro-dollars, rounded up."""
        return -(-tokens * self.micro_usd // self.tokens)

    @property
    def usd_per_million_tokens(self) -> float:
        # micro-dollars per token are dollars per million tokens.
        return round(self.micro_usd / self.tokens, 6)


def rate_from(costs: Costs) -> Rate:
    if costs.runs >= MIN_PRICED_RUNS and costs.tokens > 0:
        return Rate(micro_usd=costs.micro_usd, tokens=costs.tokens, observed=True,
                    runs=costs.runs)
    return Rate(micro_usd=DEFAULT_USD_PER_MILLION_TOKENS, tokens=1, observed=False,
                runs=costs.runs)


@dataclass(frozen=True)
class DollarWindow:
    """The trailing 30-day dollar window; on the ladder only when it has a limit."""

    limit_micro: int | None
    spent_micro: int
    unpriced_micro: int
    reserved_micro: int
    run_micro: int            # the estimated cost of one run of max_run_tokens
    rate: Rate
    frees_at: datetime | None

    @property
    def name(self) -> str:
        return MONTHLY

    @property
    def charged_micro(self) -> int:
        return self.spent_micro + self.unpriced_micro + self.reserved_micro

    @property
    def remaining_micro(self) -> int | None:
        if self.limit_micro is None:
            return None
        return max(0, self.limit_micro - self.charged_micro)

    def at_least(self, pct: int) -> bool:
        """Utilisation ≥ ``pct`` %, in integers; never, without a limit."""
        return self.limit_micro is not None and self.charged_micro * 100 >= pct * self.limit_micro

    def fits_a_run(self) -> bool:
        remaining = self.remaining_micro
        return remaining is None or remaining >= self.run_micro

    def as_json(self) -> dict[str, object]:
        remaining = self.remaining_micro
        return {
            "limit_usd": None if self.limit_micro is None else usd(self.limit_micro),
            "spent_usd": usd(self.spent_micro),
            "unpriced_usd": usd(self.unpriced_micro),
            "reserved_usd": usd(self.reserved_micro),
            "remaining_usd": None if remaining is None else usd(remaining),
            "run_estimate_usd": usd(self.run_micro),
            "usd_per_million_tokens": self.rate.usd_per_million_tokens,
            "rate_source": "observed" if self.rate.observed else "default",
            "priced_runs": self.rate.runs,
            "frees_at": None if self.frees_at is None else self.frees_at.isoformat(),
        }


def measure_dollars(conn: Transaction, now: datetime, config: BudgetConfig
                    ) -> DollarWindow:
    """The dollar window at ``now``: five indexed reads, whatever the ledger's size."""
    start = now - MONTH
    costs = costs_since(conn, start)
    charged, reserved, oldest = ledger_windows.window_charge(conn, start)
    rate = rate_from(costs)
    unpriced_tokens = max(0, charged - reserved - costs.tokens)
    limit = config.monthly_usd
    return DollarWindow(
        limit_micro=None if limit is None else round(limit * MICRO),
        spent_micro=costs.micro_usd,
        unpriced_micro=rate.cost_of(unpriced_tokens),
        reserved_micro=rate.cost_of(reserved),
        run_micro=rate.cost_of(config.max_run_tokens),
        rate=rate,
        frees_at=None if oldest is None else oldest + MONTH,
    )
