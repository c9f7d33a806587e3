"""The circuit breaker and the calibration: the only feedback from reality into the limits.

Every configured limit is a guess, and a guess that is too high is the one failure the
windows cannot see: they report healthy utilisation while the plan refuses. When a run
ends ``usage_limit`` the breaker *trips*: nothing is admitted until the reset the engine
reported (or ``DEFAULT_TRIP`` when it named none), and ``calibrated_pct`` drops so the
effective limits sit below what reality just refused, with a margin.

The calibration relaxes back toward 100 % by itself, derived at read time from the
stored trips (no background job): the rate ``R = 1 point/day ÷ (1 + trips in the last
365 days)``, integrated over the quiet time since the last trip and floored. Each trip
slows the climb, so with a fixed real limit the trips get rarer instead of recurring once
per window.

State lives in ``budget_state`` under ``calibrated_pct``, ``tripped_until``,
``last_trip_at`` and ``recent_trips`` (the trip instants of the last 365 days, as a JSON
list). A missing key means "never": 100 %, not tripped.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Final

from service.budget.windows import WindowState, measure
from service.config.schema import BudgetConfig
from service.storage import budget_state
from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

log = logging.getLogger(__name__)

#: How long the breaker stays tripped when the engine did not say when the limit resets:
#: the plan's session window, the shortest of its limits and the usual one to hit.
DEFAULT_TRIP: Final = timedelta(hours=5)
#: The calibration never drops below this: a floor that still admits a run or two.
FLOOR_PCT: Final = 10
#: The new effective limits sit at this share of what reality refused: a 10 % margin.
MARGIN_PCT: Final = 90
#: Trips within this long slow the relaxation (each one divides its rate).
TRIP_MEMORY: Final = timedelta(days=365)
#: One point of calibration per this long, divided by (1 + recent trips).
RELAX_STEP: Final = timedelta(days=1)
_MICROSECOND: Final = timedelta(microseconds=1)

CALIBRATED_PCT: Final = "calibrated_pct"
TRIPPED_UNTIL: Final = "tripped_until"
LAST_TRIP_AT: Final = "last_trip_at"
RECENT_TRIPS: Final = "recent_trips"
KEYS: Final = (CALIBRATED_PCT, TRIPPED_UNTIL, LAST_TRIP_AT, RECENT_TRIPS)



class BreakerStateError(ValueError):
    """A ``budget_state`` value the breaker cannot read (edited by hand?)."""


@dataclass(frozen=True)
class BreakerState:
    """The breaker as stored. The defaults are a store that has never tripped."""

    calibrated_pct: int = 100
    tripped_until: datetime | None = None
    last_trip_at: datetime | None = None
    trips: tuple[datetime, ...] = ()

    def tripped(self, now: datetime) -> bool:
        return self.tripped_until is not None and now < self.tripped_until

    def trips_within_memory(self, now: datetime) -> int:
        """Trips in the 365 days up to ``now`` (later ones, if the clock went back, count)."""
        return sum(1 for t in self.trips if t > now - TRIP_MEMORY)

    def effective_pct(self, now: datetime) -> int:
        """The calibration in force at ``now``: stored, plus what quiet time has relaxed.

        The rate ``1 point/day ÷ (1 + trips in the 365 days up to t)`` changes only when a
        trip leaves the memory, so the relaxation since the last trip is integrated piece
        by piece, exactly (fractions of microseconds), then floored. Applying today's rate
        to every quiet day instead would jump the calibration up by weeks' worth of points
        the moment an old trip is forgotten.
        """
        if self.last_trip_at is None or self.calibrated_pct >= 100 or now <= self.last_trip_at:
            return min(100, self.calibrated_pct)
        forgotten = sorted(t + TRIP_MEMORY for t in self.trips)
        edges = [self.last_trip_at, *(f for f in forgotten if self.last_trip_at < f < now), now]
        relaxed = Fraction(0)
        for start, end in itertools.pairwise(edges):
            recent = sum(1 for f in forgotten if f > start)  # trips remembered on [start, end)
            relaxed += Fraction((end - start) // _MICROSECOND,
                                (RELAX_STEP // _MICROSECOND) * (1 + recent))
        return min(100, self.calibrated_pct + math.floor(relaxed))


def _parse_time(key: str, value: str) -> datetime:
    try:
        return from_db_time(value)
    except ValueError:
        raise BreakerStateError(
            f"budget_state {key} holds {value!r}, not a time; "
            "`pr-review-agent budget --reset-calibration` clears it") from None


def read_breaker(conn: Transaction) -> BreakerState:
    """The breaker's state from ``budget_state`` (one indexed read of four keys).

    A value that cannot be read raises ``BreakerStateError`` rather than being guessed
    at: an admit that fails admits nothing, which is the safe direction.
    """
    values = budget_state.read_state(conn, KEYS)
    if not values:
        return BreakerState()
    pct = values.get(CALIBRATED_PCT, "100")
    if not pct.isdigit() or not FLOOR_PCT <= int(pct) <= 100:
        raise BreakerStateError(
            f"budget_state {CALIBRATED_PCT} holds {pct!r}, not a percentage from "
            f"{FLOOR_PCT} to 100; `pr-review-agent budget --reset-calibration` clears it")
    until = values.get(TRIPPED_UNTIL)
    last = values.get(LAST_TRIP_AT)
    try:
        raw_trips = json.loads(values.get(RECENT_TRIPS, "[]"))
        if not isinstance(raw_trips, list) or not all(isinstance(t, str) for t in raw_trips):
            raise TypeError
    except (ValueError, TypeError):
        raise BreakerStateError(
            f"budget_state {RECENT_TRIPS} is not a JSON list of times; "
            "`pr-review-agent budget --reset-calibration` clears it") from None
    return BreakerState(
        calibrated_pct=int(pct),
        tripped_until=None if until is None else _parse_time(TRIPPED_UNTIL, until),
        last_trip_at=None if last is None else _parse_time(LAST_TRIP_AT, last),
        trips=tuple(_parse_time(RECENT_TRIPS, t) for t in raw_trips),
    )


def recalibrated(current_pct: int, windows: Iterable[WindowState]) -> int:
    """The calibration after a trip, from the windows measured at their *configured* limits.

    ``observed`` is the highest share of a configured limit the agent had *settled* when
    reality refused. Settled spend is a lower bound of what reality counted (an open
    reservation may have spent anything from nothing to all of it), so limits set below
    it are below the real one. The new value is 90 % of that, floored, but always at
    least a point below the calibration in force (a trip means the guess was too high)
    and never below ``FLOOR_PCT``.
    """
    observed = max((w.spent * MARGIN_PCT // w.limit for w in windows if w.limit > 0),
                   default=FLOOR_PCT)
    return max(FLOOR_PCT, min(observed, current_pct - 1))


def trip_until(now: datetime, resets_at: datetime | None) -> datetime:
    """When a trip at ``now`` ends: the engine's reset time, or ``DEFAULT_TRIP`` from now
    when it gave none (or one already past, which cannot be what it meant)."""
    return resets_at if resets_at is not None and resets_at > now else now + DEFAULT_TRIP


def tripped_state(state: BreakerState, *, now: datetime, resets_at: datetime | None,
                  new_pct: int) -> BreakerState:
    """The state after a new trip at ``now``."""
    until = trip_until(now, resets_at)
    recent = (*(t for t in state.trips if t > now - TRIP_MEMORY), now)
    return BreakerState(calibrated_pct=new_pct, tripped_until=until, last_trip_at=now,
                        trips=recent)


def record_trip(conn: Transaction, *, now: datetime, resets_at: datetime | None,
                config: BudgetConfig) -> BreakerState:
    """Trip the breaker at ``now`` through ``conn``, and return the new state.

    A trip while already tripped is the same event seen by another run in flight: it only
    pushes ``tripped_until`` later, and neither recalibrates nor counts as a trip.
    Otherwise the calibration is taken from the windows at ``config``'s configured limits.
    """
    for name, t in (("now", now), ("resets_at", resets_at)):
        if t is not None and (t.tzinfo is None or t.utcoffset() is None):
            raise ValueError(f"{name} must be timezone-aware, got {t.isoformat()}")
    state = read_breaker(conn)
    current = state.effective_pct(now)
    if state.tripped_until is not None and state.tripped(now):
        new = replace(state, tripped_until=max(state.tripped_until, trip_until(now, resets_at)))
        write_breaker(conn, new)
        log.info("usage limit reported while the breaker is already tripped; "
                 "tripped until %s", new.tripped_until)
        return new
    pct = recalibrated(current, measure(conn, now, config))
    new = tripped_state(state, now=now, resets_at=resets_at, new_pct=pct)
    write_breaker(conn, new)
    log.warning("usage limit reached: the breaker is tripped until %s and the limits are "
                "calibrated from %d%% to %d%% (%d trip(s) in 365 days)",
                new.tripped_until, current, new.calibrated_pct, len(new.trips),
                extra={"tripped_until": to_db_time(new.tripped_until or now),
                       "calibrated_pct": new.calibrated_pct})
    return new


def write_breaker(conn: Transaction, state: BreakerState) -> None:
    """Store ``state`` (every key it has a value for) through ``conn``."""
    rows = [(CALIBRATED_PCT, str(state.calibrated_pct)),
            (RECENT_TRIPS, json.dumps([to_db_time(t) for t in state.trips]))]
    if state.tripped_until is not None:
        rows.append((TRIPPED_UNTIL, to_db_time(state.tripped_until)))
    if state.last_trip_at is not None:
        rows.append((LAST_TRIP_AT, to_db_time(state.last_trip_at)))
    budget_state.write_state(conn, rows)


def reset_breaker(conn: Transaction) -> int:
    """Forget every trip and the calibration (back to 100 %, untripped); rows deleted."""
    return budget_state.delete_state(conn, KEYS)
