"""The three rolling token windows over the ledger: their limits and their charge.

A window's charge is ``SUM(COALESCE(used_tokens, reserved_tokens))`` over the ledger rows
reserved after its start: a settled run counts what it spent, an open reservation its
whole ``max_run_tokens``. Every limit is a whole number of tokens; ``pct`` scales the
configured limits down to the effective ones the circuit breaker's calibration allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from service.config.schema import BudgetConfig
from service.storage import ledger_windows
from service.storage.database import Transaction


@dataclass(frozen=True)
class Window:
    name: str
    duration: timedelta


SESSION: Final = Window("session", timedelta(hours=5))
DAILY: Final = Window("daily", timedelta(hours=24))
WEEKLY: Final = Window("weekly", timedelta(days=7))
WINDOWS: Final = (SESSION, DAILY, WEEKLY)


def limit_of(window: Window, config: BudgetConfig, pct: int = 100) -> int:
    """A window's limit in whole tokens: the share applied (see BudgetConfig), then
    ``pct`` % of that, floored (``pct`` is the calibration; 100 is the limit as configured).
    """
    configured = {
        "session": config.session_limit,
        "daily": config.daily_limit,
        "weekly": config.weekly_limit,
    }[window.name]
    return configured * pct // 100


@dataclass(frozen=True)
class WindowState:
    """One window as ``GET /budget`` shows it."""

    name: str
    duration_seconds: int
    limit: int          # the effective limit: configured × calibration, floored
    spent: int          # settled usage in the window
    reserved: int       # open reservations in the window, counted in full
    frees_at: datetime | None  # when the oldest charge in the window ages out
    configured_limit: int | None = None  # before calibration; None means the same as limit

    @property
    def charged(self) -> int:
        return self.spent + self.reserved

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.charged)

    def at_least(self, pct: int) -> bool:
        """Utilisation ≥ ``pct`` %, in integers: no float drift at a boundary."""
        return self.charged * 100 >= pct * self.limit

    @property
    def utilisation(self) -> float:
        return 1.0 if self.limit == 0 else round(self.charged / self.limit, 4)


def tightest(windows: tuple[WindowState, ...]) -> WindowState:
    """The window with the least allowance left (the first of equals, in WINDOWS order)."""
    return min(windows, key=lambda w: w.remaining)


def measure(conn: Transaction, now: datetime, config: BudgetConfig, pct: int = 100
            ) -> tuple[WindowState, ...]:
    """Every window's state at ``now``, read through ``conn``, at ``pct`` % of its limit."""
    states = []
    charges = ledger_windows.window_charges(conn, [now - window.duration for window in WINDOWS])
    for window, (charged, reserved, oldest) in zip(WINDOWS, charges, strict=True):
        states.append(WindowState(
            name=window.name,
            duration_seconds=int(window.duration.total_seconds()),
            limit=limit_of(window, config, pct),
            spent=charged - reserved,
            reserved=reserved,
            frees_at=None if oldest is None else oldest + window.duration,
            configured_limit=limit_of(window, config),
        ))
    return tuple(states)


@dataclass(frozen=True)
class ActorCharge:
    """One person's charge in one window, and when its oldest part ages out."""

    window: str
    charged: int
    frees_at: datetime | None


def measure_actor(conn: Transaction, now: datetime, actor_id: int, *,
                  installation: bool = False) -> tuple[ActorCharge, ...]:
    """What ``actor_id``'s runs (``installation``: installation ``actor_id``'s) are charged
    in each window at ``now`` (WINDOWS order)."""
    read = ledger_windows.installation_charges if installation else ledger_windows.actor_charges
    charges = read(conn, actor_id, [(w.name, now - w.duration) for w in WINDOWS])
    return tuple(
        ActorCharge(window=w.name, charged=charged,
                    frees_at=None if oldest is None else oldest + w.duration)
        for w, (charged, oldest) in zip(WINDOWS, charges, strict=True)
    )
