"""The three rolling token windows over the ledger: their limits and their charge.

A window's charge is ``SUM(COALESCE(used_tokens, reserved_tokens))`` over the ledger rows
reserved after its start: a settled run counts what it spent, an open reservation its
whole ``max_run_tokens``. Every limit is a whole number of tokens; ``pct`` scales the
configured limits down to the effective ones the circuit breaker's calibration allows.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from service.config import BudgetConfig
from service.store import from_db_time, to_db_time


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


# One query measures a window: its charge is SUM(COALESCE(used_tokens, reserved_tokens))
# over the rows reserved after its start -- a settled row counts what it spent, an open
# one its whole reservation. Summing the rows directly costs a scan of every row in the
# window (25 ms at 100k rows); the same number is the window's whole hours from
# ledger_hours (kept by triggers, migration 24) plus the raw rows of its first, partial
# hour. The open reservations and the oldest charge come from indexes of their own.
_WINDOW = """
SELECT (SELECT COALESCE(SUM(charged), 0) FROM ledger_hours WHERE hour > :start_hour)
     + (SELECT COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) FROM ledger
         WHERE reserved_at > :start AND reserved_at < :next_hour),
       (SELECT COALESCE(SUM(reserved_tokens), 0) FROM ledger
         WHERE settled_at IS NULL AND reserved_at > :start),
       (SELECT MIN(reserved_at) FROM ledger WHERE reserved_at > :start)
"""


def window_params(start: datetime) -> dict[str, str]:
    """The bounds ``_WINDOW`` needs for a window that opens (exclusively) at ``start``."""
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    stamp = to_db_time(start)
    return {"start": stamp, "start_hour": stamp[:13],
            "next_hour": to_db_time(hour + timedelta(hours=1))}


def charge_since(conn: sqlite3.Connection, start: datetime) -> tuple[int, int, datetime | None]:
    """``(charged, open reserved, oldest reserved_at)`` of the rows reserved after ``start``."""
    charged, reserved, oldest = conn.execute(_WINDOW, window_params(start)).fetchone()
    return int(charged), int(reserved), None if oldest is None else from_db_time(oldest)


def measure(conn: sqlite3.Connection, now: datetime, config: BudgetConfig, pct: int = 100
            ) -> tuple[WindowState, ...]:
    """Every window's state at ``now``, read through ``conn``, at ``pct`` % of its limit."""
    states = []
    for window in WINDOWS:
        charged, reserved, oldest = charge_since(conn, now - window.duration)
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


# One person's charge in every window, off the ledger_actor_window index: one range
# scan over the person's rows of the longest window, split by CASE into the others.
# A person's rows in a week are few (they are runs somebody asked for), so this stays
# cheap without an hourly table of its own.
_ACTOR = "SELECT " + ", ".join(
    f"COALESCE(SUM(CASE WHEN reserved_at > :{w.name} THEN"
    f" COALESCE(used_tokens, reserved_tokens) END), 0),"
    f" MIN(CASE WHEN reserved_at > :{w.name} THEN reserved_at END)"
    for w in WINDOWS
) + f" FROM ledger WHERE actor_id = :actor AND reserved_at > :{WINDOWS[-1].name}"


@dataclass(frozen=True)
class ActorCharge:
    """One person's charge in one window, and when its oldest part ages out."""

    window: str
    charged: int
    frees_at: datetime | None


def measure_actor(conn: sqlite3.Connection, now: datetime, actor_id: int
                  ) -> tuple[ActorCharge, ...]:
    """What ``actor_id``'s runs are charged in each window at ``now`` (WINDOWS order)."""
    params: dict[str, object] = {w.name: to_db_time(now - w.duration) for w in WINDOWS}
    params["actor"] = actor_id
    row = conn.execute(_ACTOR, params).fetchone()
    return tuple(
        ActorCharge(window=w.name, charged=int(row[2 * i]),
                    frees_at=None if row[2 * i + 1] is None
                    else from_db_time(row[2 * i + 1]) + w.duration)
        for i, w in enumerate(WINDOWS)
    )
