"""The circuit breaker and its calibration: reality's refusal feeds back into the limits."""

from __future__ import annotations

import itertools
import random
import sqlite3
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from service.budget.breaker import (
    DEFAULT_TRIP,
    BreakerState,
    BreakerStateError,
    read_breaker,
    recalibrated,
)
from service.budget.governor import Governor
from service.budget.ladder import Mode
from service.budget.usage import Usage
from service.budget.windows import WINDOWS, WindowState, limit_of, measure
from service.config.schema import BudgetConfig
from service.storage.database import Database
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.queue_helpers import LEASE, T0, budget, mention

DAY = timedelta(days=1)


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def charge(store: SqliteStore, tokens: int, at: datetime, key: str) -> None:
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens, used_tokens,"
            " usage_confidence, reserved_at, settled_at, stop_reason)"
            " VALUES (?, 'old', 1, 'full', ?, ?, 'exact', ?, ?, 'completed')",
            (key, tokens, tokens, to_db_time(at), to_db_time(at)))


def claim_one(queue: QueueDriver, gov: Governor, now: datetime, pr: int) -> Claim:
    queue.enqueue(mention(pr, pr), now=now)
    c = queue.claim(now=now, owner="w", admit=gov.admit)
    assert c is not None
    return c


def state(store: SqliteStore) -> BreakerState:
    with store.read() as conn:
        return read_breaker(conn)


# -- tripping ---------------------------------------------------------------------------------

def test_a_usage_limit_trips_until_the_reported_reset_and_calibrates(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=10_000)
    charge(store, 50_000, T0 - timedelta(hours=4, minutes=30), "mention:o/r:900:1")
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    c = claim_one(queue, gov, T0, 1)
    resets = T0 + timedelta(hours=2)
    assert gov.settle(c, Usage(0, "exact", "claude_code", None), now=T0,
                      stop_reason="usage_limit", resets_at=resets)
    s = state(store)
    # 50 000 settled of a 100 000 session limit: 50 % × 0.9 = 45 %.
    assert (s.calibrated_pct, s.tripped_until, s.last_trip_at, s.trips) == (45, resets, T0, (T0,))
    queue.enqueue(mention(2, 2), now=T0)
    assert queue.claim(now=T0 + timedelta(minutes=5), owner="w", admit=gov.admit) is None
    refusal = gov.refusals["mention:o/r:2:2"]
    assert (refusal.reason, refusal.mode, refusal.window, refusal.frees_at) == (
        "breaker", Mode.EXHAUSTED, None, resets)
    row = queue.get("mention:o/r:2:2")
    assert row is not None and row.status == "pending" and row.attempts == 0
    snap = gov.snapshot(T0 + timedelta(minutes=5)).as_json()
    assert snap["mode"] == "exhausted"
    assert snap["breaker"] == {
        "tripped": True, "tripped_until": resets.isoformat(), "calibrated_pct": 45,
        "effective_pct": 45, "last_trip_at": T0.isoformat(), "trips_remembered": 1}
    session = snap["windows"][0]  # type: ignore[index]
    assert (session["limit"], session["configured_limit"]) == (45_000, 100_000)
    # At the reset the breaker is closed again; the old charge has left the session window.
    assert queue.claim(now=resets, owner="w", admit=gov.admit) is not None


def test_without_a_reset_time_the_breaker_holds_for_the_session_window(
        store: SqliteStore) -> None:
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    c = claim_one(queue, gov, T0, 1)
    gov.settle(c, Usage(0, "exact", "e", None), now=T0, stop_reason="usage_limit")
    assert state(store).tripped_until == T0 + DEFAULT_TRIP == T0 + timedelta(hours=5)
    # A reset time already in the past cannot be what the engine meant: the default too.
    gov.reset_calibration()
    gov.trip(now=T0, resets_at=T0 - timedelta(minutes=1))
    assert state(store).tripped_until == T0 + DEFAULT_TRIP


def test_a_trip_while_tripped_extends_but_does_not_recalibrate_or_count(
        store: SqliteStore) -> None:
    gov = Governor(store, budget(session_tokens=100_000))
    charge(store, 80_000, T0 - timedelta(hours=1), "k1")
    first = gov.trip(now=T0, resets_at=T0 + timedelta(hours=1))
    assert first.calibrated_pct == 72
    # Another run in flight hits the same limit a minute later.
    second = gov.trip(now=T0 + timedelta(minutes=1), resets_at=T0 + timedelta(hours=3))
    assert (second.calibrated_pct, second.trips, second.tripped_until) == (
        72, (T0,), T0 + timedelta(hours=3))
    # An earlier reset never shortens the trip.
    third = gov.trip(now=T0 + timedelta(minutes=2), resets_at=T0 + timedelta(minutes=30))
    assert third.tripped_until == T0 + timedelta(hours=3)


def test_settle_trips_even_when_the_reservation_was_no_longer_ours(store: SqliteStore) -> None:
    from dataclasses import replace
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    c = claim_one(queue, gov, T0, 1)
    stale = replace(c, lease=replace(c.lease, owner="someone-else"))
    assert gov.settle(stale, Usage(0, "exact", "e", None), now=T0,
                      stop_reason="usage_limit") is False
    assert state(store).tripped(T0)


def test_resets_at_needs_usage_limit_and_an_aware_time(store: SqliteStore) -> None:
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    c = claim_one(queue, gov, T0, 1)
    with pytest.raises(ValueError, match="usage_limit"):
        gov.settle(c, Usage(0, "exact", "e", None), now=T0, resets_at=T0 + DAY)
    with pytest.raises(ValueError, match="timezone-aware"):
        gov.settle(c, Usage(0, "exact", "e", None), now=T0, stop_reason="usage_limit",
                   resets_at=datetime(2026, 11, 3, 9, 0))  # naive: the point
    assert not state(store).tripped(T0)  # nothing was half-done


# -- calibration ------------------------------------------------------------------------------

def window(spent: int, limit: int) -> WindowState:
    return WindowState("session", 18_000, limit, spent, 0, None)


@pytest.mark.parametrize(("current", "spent", "expected"), [
    (100, 60_000, 54),   # 60 % observed, 10 % margin
    (100, 99_999, 89),   # floored, never rounded up
    (50, 95_000, 49),    # always at least a point below what was in force
    (100, 0, 10),        # nothing settled: the floor
    (10, 50_000, 10),    # at the floor it stays there
])
def test_recalibration(current: int, spent: int, expected: int) -> None:
    assert recalibrated(current, [window(spent, 100_000), window(0, 700_000)]) == expected


def test_the_worst_window_decides_the_calibration() -> None:
    assert recalibrated(100, [window(10_000, 100_000), window(70_000, 100_000)]) == 63


def test_relaxation_is_one_point_a_day_divided_by_recent_trips() -> None:
    s = BreakerState(calibrated_pct=50, tripped_until=T0 + DAY, last_trip_at=T0, trips=(T0,))
    # One trip remembered: half a point a day, for as long as the memory (a year) lasts.
    assert [s.effective_pct(T0 + n * DAY) for n in (0, 1, 2, 3, 27, 60)] == [
        50, 50, 51, 51, 63, 80]
    assert s.effective_pct(T0 + 100 * DAY) == 100
    # An old trip leaving the memory raises the rate from then on; the points earned so
    # far are not recounted at the new rate (no jump).
    old = BreakerState(calibrated_pct=50, last_trip_at=T0, trips=(T0 - 360 * DAY, T0))
    assert old.effective_pct(T0 + 5 * DAY) == 51    # 5 days at a third of a point
    assert old.effective_pct(T0 + 11 * DAY) == 54   # then 6 days at half a point, not 55
    two = BreakerState(calibrated_pct=50, last_trip_at=T0, trips=(T0 - 10 * DAY, T0))
    assert two.effective_pct(T0 + 3 * DAY) == 51  # a third of a point a day
    days = [s.effective_pct(T0 + timedelta(hours=h)) for h in range(0, 24 * 70, 7)]
    assert days == sorted(days)  # relaxation never goes back down


def test_effective_limits_drive_the_ladder(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=5_000)
    gov = Governor(store, config)
    charge(store, 30_000, T0 - timedelta(hours=4, minutes=50), "k1")
    assert gov.snapshot(T0).mode is Mode.FULL  # 30 % of 100 000
    gov.trip(now=T0 - timedelta(hours=4, minutes=45), resets_at=T0)  # 30 % × 0.9 = 27 %
    snap = gov.snapshot(T0)
    assert snap.breaker.effective_pct == 27 and snap.windows[0].limit == 27_000
    assert snap.mode is Mode.EXHAUSTED  # 30 000 charged of 27 000 allowed
    assert gov.snapshot(T0 + timedelta(minutes=15)).mode is Mode.FULL  # the charge aged out


def test_reset_calibration_forgets_everything(store: SqliteStore) -> None:
    gov = Governor(store, budget())
    gov.trip(now=T0)
    gov.reset_calibration()
    assert state(store) == BreakerState()
    assert gov.snapshot(T0).breaker.as_json() == {
        "tripped": False, "tripped_until": None, "calibrated_pct": 100, "effective_pct": 100,
        "last_trip_at": None, "trips_remembered": 0}


def test_an_unreadable_breaker_state_admits_nothing_until_reset(store: SqliteStore) -> None:
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    with store.transaction() as conn:
        conn.execute("INSERT INTO budget_state (key, value) VALUES ('calibrated_pct', 'lots')")
    queue.enqueue(mention(1, 1), now=T0)
    with pytest.raises(BreakerStateError, match="--reset-calibration"):
        queue.claim(now=T0, owner="w", admit=gov.admit)
    assert queue.get("mention:o/r:1:1").status == "pending"  # type: ignore[union-attr]
    gov.reset_calibration()
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is not None


# -- the simulation ---------------------------------------------------------------------------

@pytest.mark.slow(12)
def test_trips_become_rare_against_a_real_limit_below_the_configured_one(
        tmp_path: Path) -> None:
    """Six weeks of fake time; the engine's real limit is 60 % of every configured one.

    The fake engine refuses (usage_limit, no tokens) a run that would take reality's own
    rolling spend over its real limit. Every admitted claim is checked, inside its
    transaction, against the effective (calibrated) windows.
    """
    config = BudgetConfig(enabled=True, session_tokens=100_000, weekly_tokens=1_400_000,
                          max_run_tokens=10_000, reviewer_share_pct=100)
    real = {w.name: limit_of(w, config) * 60 // 100 for w in WINDOWS}
    rng = random.Random(20261102)
    spent: list[tuple[datetime, int]] = []   # what reality counted
    trips: list[datetime] = []
    calibrations: list[int] = []
    violations: list[str] = []
    with new_sqlite_store(tmp_path / "sim.db") as store:
        queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)

        def checked(conn: sqlite3.Connection, claim: Claim, now: datetime) -> bool:
            ok = gov.admit(conn, claim, now)
            if ok:
                pct = read_breaker(conn).effective_pct(now)
                violations.extend(f"{w.name} {w.charged} > {w.limit} at {now}"
                                  for w in measure(conn, now, config, pct)
                                  if w.charged > w.limit)
            return ok

        now, end, n, admitted = T0, T0 + timedelta(weeks=6), 0, 0
        while now < end:
            for _ in range(3 - queue.counts()["pending"]):  # steady demand
                n += 1
                queue.enqueue(mention(n, n, actor=n % 5), now=now)
            while (c := queue.claim(now=now, owner="w", admit=checked)) is not None:
                admitted += 1
                tokens = rng.randint(3_000, 10_000)
                over = [w for w in WINDOWS if tokens + sum(
                    t for at, t in spent if at > now - w.duration) > real[w.name]]
                if over:
                    w = over[0]
                    oldest = min(at for at, _ in spent if at > now - w.duration)
                    resets = oldest + w.duration if len(trips) % 2 == 0 else None
                    gov.settle(c, Usage(0, "exact", "fake", None), now=now,
                               stop_reason="usage_limit", resets_at=resets)
                    trips.append(now)
                    calibrations.append(state(store).calibrated_pct)
                else:
                    spent.append((now, tokens))
                    gov.settle(c, Usage(tokens, "exact", "fake", None), now=now)
                queue.finish(c.dedupe_key, c.lease.owner)
            now += timedelta(minutes=30)

    per_week = [sum(1 for t in trips if (t - T0) // timedelta(weeks=1) == week)
                for week in range(6)]
    assert violations == []
    assert admitted > 300  # the agent kept working throughout
    assert trips, "the real limit was never reached: the simulation proves nothing"
    assert per_week[3] <= per_week[0] and per_week[-1] <= 1, per_week
    assert sum(per_week[1:]) <= 2, per_week  # against one a window for an uncalibrated agent
    # Every calibration lands below the real limit (60 %), margin included.
    assert all(pct <= 54 for pct in calibrations), calibrations
    gaps = [b - a for a, b in itertools.pairwise(trips)]
    assert all(gap >= timedelta(days=14) for gap in gaps), gaps
