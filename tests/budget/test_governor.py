"""The governor: windows, the ladder, reserve-then-settle, and what refusal does."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.budget.ladder import Mode
from service.budget.usage import Usage
from service.budget.windows import measure
from service.config.schema import BudgetConfig
from service.storage.database import Database
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.queue_helpers import LEASE, T0, budget, mention, opened


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def charge(store: SqliteStore, tokens: int, at: datetime, *, key: str = "", settled: bool = True,
           owner: str = "old") -> None:
    """A ledger row as an earlier run would have left it."""
    key = key or f"mention:o/r:999:{tokens}-{at.isoformat()}"
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens, used_tokens,"
            " usage_confidence, engine, reserved_at, settled_at, stop_reason)"
            " VALUES (?, ?, 1, 'full', ?, ?, ?, ?, ?, ?, ?)",
            (key, owner, tokens, tokens if settled else None, "exact" if settled else None,
             "fake" if settled else None, to_db_time(at), to_db_time(at) if settled else None,
             "completed" if settled else None),
        )


def ledger(store: SqliteStore) -> list[tuple[object, ...]]:
    with store.read() as conn:
        return list(conn.execute(
            "SELECT dedupe_key, owner, mode, reserved_tokens, used_tokens, usage_confidence,"
            " engine, model, stop_reason, settled_at IS NOT NULL, repo, pr_number, actor_id"
            " FROM ledger ORDER BY id"))


def window_charge(store: SqliteStore, now: datetime, config: BudgetConfig) -> dict[str, int]:
    with store.read() as conn:
        return {w.name: w.charged for w in measure(conn, now, config)}


def setup(store: SqliteStore, config: BudgetConfig) -> tuple[QueueDriver, Governor]:
    return QueueDriver(store, lease=LEASE), Governor(store, config)


# -- limits ---------------------------------------------------------------------------------

def test_limits_are_floored_after_the_share_and_the_seventh() -> None:
    c = BudgetConfig(enabled=True, session_tokens=88_000, weekly_tokens=1_500_000,
                     max_run_tokens=60_000, reviewer_share_pct=40)
    assert (c.session_limit, c.daily_limit, c.weekly_limit) == (35_200, 85_714, 600_000)
    odd = BudgetConfig(enabled=True, session_tokens=99_999, weekly_tokens=1_000_003,
                       max_run_tokens=1, reviewer_share_pct=33)
    assert odd.session_limit == 32_999  # 32999.67 floored
    assert odd.weekly_limit == 330_000  # 330000.99 floored
    assert odd.daily_limit == 47_142    # 330000 / 7 = 47142.86 floored


# -- admit ----------------------------------------------------------------------------------

def test_admit_reserves_max_run_tokens_with_the_claim(store: SqliteStore) -> None:
    queue, gov = setup(store, budget())
    queue.enqueue(mention(4, 40, actor=77), now=T0)
    c = queue.claim(now=T0, owner="h:1:0", admit=gov.admit)
    assert c is not None
    assert ledger(store) == [("mention:o/r:4:40", "h:1:0", "full", 10_000, None, None, None,
                              None, None, 0, "o/r", 4, 77)]


def test_enabled_false_admits_nothing(store: SqliteStore) -> None:
    queue, gov = setup(store, budget(enabled=False))
    queue.enqueue(mention(1, 1), now=T0)
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is None
    assert ledger(store) == []
    assert gov.refusals["mention:o/r:1:1"].reason == "disabled"
    assert gov.snapshot(T0).enabled is False


@pytest.mark.parametrize(("charged", "mode"), [
    (84_999, Mode.REDUCED), (85_000, Mode.MENTION_ONLY),
    (99_999, Mode.MENTION_ONLY), (100_000, Mode.EXHAUSTED),
])
def test_the_ladder_switches_at_exactly_85_and_100_percent(
        store: SqliteStore, charged: int, mode: Mode) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=1)
    charge(store, charged, T0 - timedelta(hours=1))
    assert Governor(store, config).snapshot(T0).mode is mode


def test_the_ladder_has_no_float_drift_at_odd_limits(store: SqliteStore) -> None:
    # 85 % of 33,333 is 28,333.05: 28,333 is below the rung, 28,334 is on it.
    config = budget(session_tokens=33_333, max_run_tokens=1)
    charge(store, 28_333, T0 - timedelta(hours=1))
    assert Governor(store, config).snapshot(T0).mode is Mode.REDUCED
    charge(store, 1, T0 - timedelta(minutes=30))
    assert Governor(store, config).snapshot(T0).mode is Mode.MENTION_ONLY


def test_mention_only_refuses_pr_opened_but_admits_the_mention_behind_it(
        store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=5_000)
    charge(store, 86_000, T0 - timedelta(hours=1))
    queue, gov = setup(store, config)
    queue.enqueue(opened(1), now=T0)
    queue.enqueue(mention(2, 20), now=T0 + timedelta(seconds=1))
    c = queue.claim(now=T0 + timedelta(seconds=2), owner="w", admit=gov.admit)
    assert c is not None and c.job.kind == "mention"
    head = queue.get("pr_opened:o/r:1:" + "a" * 40)
    assert head is not None and head.status == "pending" and head.attempts == 0
    refusal = gov.refusals[head.dedupe_key]
    assert (refusal.reason, refusal.mode, refusal.window) == (
        "mention_only", Mode.MENTION_ONLY, "session")


def test_exhausted_refuses_everything_and_costs_no_attempt(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=5_000)
    spent_at = T0 - timedelta(hours=1)
    charge(store, 100_000, spent_at)
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    for i in range(5):
        assert queue.claim(now=T0 + timedelta(minutes=i), owner="w", admit=gov.admit) is None
    row = queue.get("mention:o/r:1:1")
    assert row is not None and row.status == "pending" and row.attempts == 0
    refusal = gov.refusals["mention:o/r:1:1"]
    assert refusal.reason == "exhausted" and refusal.window == "session"
    assert refusal.frees_at == spent_at + timedelta(hours=5)
    # Once the charge ages out of the session window the mention is admitted.
    assert queue.claim(now=spent_at + timedelta(hours=5), owner="w", admit=gov.admit)


def test_refused_when_the_tightest_remainder_is_below_max_run(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=25_000)
    charge(store, 80_000, T0 - timedelta(hours=1))  # 80 %: REDUCED, but only 20k left
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    assert gov.snapshot(T0).mode is Mode.REDUCED
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is None
    assert gov.refusals["mention:o/r:1:1"].reason == "insufficient"


def test_daily_pacing_refuses_what_the_weekly_window_alone_would_allow(
        store: SqliteStore) -> None:
    config = budget(session_tokens=10_000_000, weekly_tokens=7_000_000, max_run_tokens=10_000)
    charge(store, 995_000, T0 - timedelta(hours=2))  # daily limit is 1,000,000
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is None
    snap = gov.snapshot(T0)
    weekly = next(w for w in snap.windows if w.name == "weekly")
    assert weekly.remaining >= config.max_run_tokens  # the weekly window had room
    assert snap.tightest == "daily"
    assert gov.refusals["mention:o/r:1:1"].window == "daily"
    assert queue.claim(now=T0 + timedelta(hours=22, seconds=1), owner="w", admit=gov.admit)


def test_an_unsettled_reservation_counts_in_full_even_after_its_lease(
        store: SqliteStore) -> None:
    config = budget(session_tokens=20_000, max_run_tokens=10_000)
    queue, gov = setup(store, config)
    for pr in (1, 2, 3):
        queue.enqueue(mention(pr, pr), now=T0)
    assert queue.claim(now=T0, owner="a", admit=gov.admit) is not None
    assert queue.claim(now=T0, owner="b", admit=gov.admit) is not None
    # Both reservations are open: the window is full and stays full past the leases.
    assert queue.claim(now=T0, owner="c", admit=gov.admit) is None
    after_leases = T0 + LEASE + timedelta(minutes=1)
    assert window_charge(store, after_leases, config)["session"] == 20_000
    assert queue.claim(now=after_leases, owner="c", admit=gov.admit) is None
    # ...until the reservations age out of the 5-hour window.
    assert queue.claim(now=T0 + timedelta(hours=5), owner="c", admit=gov.admit) is not None


def test_with_a_40_percent_share_admitted_totals_stay_within_40_percent(
        store: SqliteStore) -> None:
    config = BudgetConfig(enabled=True, session_tokens=88_000, weekly_tokens=1_500_000,
                          max_run_tokens=6_000, reviewer_share_pct=40)
    queue, gov = setup(store, config)
    for pr in range(1, 40):
        queue.enqueue(mention(pr, pr), now=T0)
    admitted = 0
    while queue.claim(now=T0, owner=f"w{admitted}", admit=gov.admit) is not None:
        admitted += 1
    assert admitted == 35_200 // 6_000  # 5 runs fit in 40 % of the session window
    assert window_charge(store, T0, config)["session"] <= 88_000 * 40 // 100


# -- settle ----------------------------------------------------------------------------------

def test_settle_releases_the_unused_remainder_and_records_the_run(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=40_000)
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None
    assert window_charge(store, T0, config)["session"] == 40_000
    usage = Usage(tokens=12_345, confidence="exact", engine="claude_code", model="sonnet")
    assert gov.settle(c, usage, now=T0 + timedelta(minutes=3), stop_reason="completed",
                      reviewed_lines=321, reviewed_since="abc")
    assert window_charge(store, T0 + timedelta(minutes=3), config)["session"] == 12_345
    with store.read() as conn:
        row = conn.execute("SELECT used_tokens, usage_confidence, engine, model, stop_reason,"
                           " reviewed_lines, reviewed_since, settled_at FROM ledger").fetchone()
    assert tuple(row) == (12_345, "exact", "claude_code", "sonnet", "completed", 321, "abc",
                          to_db_time(T0 + timedelta(minutes=3)))
    assert gov.settle(c, usage, now=T0 + timedelta(minutes=4)) is False  # already settled


def test_settle_is_guarded_on_the_owner(store: SqliteStore) -> None:
    queue, gov = setup(store, budget())
    queue.enqueue(mention(1, 1), now=T0)
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None
    from dataclasses import replace
    impostor = replace(c, lease=replace(c.lease, owner="someone-else"))
    assert gov.settle(impostor, Usage(1, "exact", "x", None), now=T0) is False
    assert gov.settle(c, Usage(1, "exact", "x", None), now=T0) is True


def test_unavailable_usage_keeps_the_full_reservation_charged(store: SqliteStore) -> None:
    config = budget(max_run_tokens=30_000)
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None
    assert gov.settle(c, Usage(None, "unavailable", "claude_code", None), now=T0,
                      stop_reason="engine_error")
    assert window_charge(store, T0, config)["session"] == 30_000


def test_a_crashed_attempts_reservation_is_closed_as_lost_and_still_counts(
        store: SqliteStore) -> None:
    config = budget(max_run_tokens=10_000)
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    first = queue.claim(now=T0, owner="h:1:0", admit=gov.admit)
    assert first is not None
    # The worker dies. Restarted with the same owner, it claims the row again.
    second = queue.claim(now=T0 + LEASE, owner="h:1:0", admit=gov.admit)
    assert second is not None and second.lease.attempt == 2
    rows = ledger(store)
    assert [(r[3], r[4], r[5], r[8], r[9]) for r in rows] == [
        (10_000, 10_000, "unavailable", "lost", 1),
        (10_000, None, None, None, 0),
    ]
    assert window_charge(store, T0 + LEASE, config)["session"] == 20_000
    # Exactly one open reservation: settle is unambiguous and charges the dead one in full.
    assert gov.settle(second, Usage(2_000, "exact", "e", "m"), now=T0 + LEASE)
    assert window_charge(store, T0 + LEASE, config)["session"] == 12_000


def test_settle_rejects_an_unknown_stop_reason(store: SqliteStore) -> None:
    queue, gov = setup(store, budget())
    queue.enqueue(mention(1, 1), now=T0)
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None
    with pytest.raises(ValueError, match="stop_reason"):
        gov.settle(c, Usage(1, "exact", "e", None), now=T0, stop_reason="bored")


def test_usage_is_validated() -> None:
    with pytest.raises(ValueError):
        Usage(None, "exact", "e", None)
    with pytest.raises(ValueError):
        Usage(-1, "exact", "e", None)
    with pytest.raises(ValueError):
        Usage(1, "guessed", "e", None)  # type: ignore[arg-type]


# -- the snapshot ---------------------------------------------------------------------------

def test_snapshot_shows_spent_reserved_remaining_and_when_it_frees(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, weekly_tokens=7_000_000, max_run_tokens=10_000)
    charge(store, 30_000, T0 - timedelta(hours=6))  # outside the session window
    charge(store, 20_000, T0 - timedelta(hours=2))
    queue, gov = setup(store, config)
    queue.enqueue(mention(1, 1), now=T0)
    assert queue.claim(now=T0, owner="w", admit=gov.admit)
    snap = gov.snapshot(T0)
    body = snap.as_json()
    assert body["mode"] == "full" and body["enabled"] is True
    assert body["max_run_tokens"] == 10_000
    windows = {w["name"]: w for w in body["windows"]}  # type: ignore[attr-defined]
    assert windows["session"] == {
        "name": "session", "duration_seconds": 18_000, "limit": 100_000, "spent": 20_000,
        "reserved": 10_000, "remaining": 70_000, "utilisation": 0.3,
        "frees_at": (T0 - timedelta(hours=2) + timedelta(hours=5)).isoformat(),
        "configured_limit": 100_000, "spent_usd": 0.0,
    }
    assert windows["daily"]["spent"] == 50_000 and windows["daily"]["reserved"] == 10_000
    assert windows["weekly"]["limit"] == 7_000_000
    assert body["tightest"] == "session"


def test_an_empty_ledger_snapshot(store: SqliteStore) -> None:
    snap = Governor(store, budget()).snapshot(T0)
    assert snap.mode is Mode.FULL
    assert all(w.frees_at is None and w.charged == 0 for w in snap.windows)


# -- reload and the measurement memo ------------------------------------------------------------

def test_a_swapped_config_takes_effect_on_the_next_claim(store: SqliteStore) -> None:
    queue, gov = setup(store, budget(enabled=False))
    queue.enqueue(mention(1, 1), now=T0)
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is None
    gov.config = budget()  # what SIGHUP does: one assignment of a frozen config
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is not None


def test_another_connections_commit_is_seen_at_the_same_instant(tmp_path: Path) -> None:
    config = budget(session_tokens=10_000, max_run_tokens=10_000)
    with new_sqlite_store(tmp_path / "s.db") as a, SqliteStore(tmp_path / "s.db") as b:
        qa, ga = setup(a, config)
        qb, gb = setup(b, config)
        qa.enqueue(mention(1, 1), now=T0)
        qa.enqueue(mention(2, 2), now=T0)
        held = qa.claim(now=T0, owner="a", admit=ga.admit)
        assert held is not None
        assert qb.claim(now=T0, owner="b", admit=gb.admit) is None  # full: measured, refused
        assert ga.settle(held, Usage(0, "exact", "e", None), now=T0, stop_reason="closed")
        # Same connection, same `now`: the measurement must not be served from before.
        assert qb.claim(now=T0, owner="b", admit=gb.admit) is not None


def test_an_exhausted_budget_ends_the_walk_at_the_first_candidate(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=5_000)
    charge(store, 100_000, T0 - timedelta(hours=1))
    queue, gov = setup(store, config)
    for pr in range(1, 51):
        queue.enqueue(mention(pr, pr), now=T0)
    offered: list[str] = []

    def counting(conn, claim, now):  # type: ignore[no-untyped-def]
        offered.append(claim.dedupe_key)
        return gov.admit(conn, claim, now)

    assert queue.claim(now=T0, owner="w", admit=counting) is None
    assert len(offered) == 1  # not fifty refusals for the same reason
    assert gov.last_refusal is not None and gov.last_refusal.reason == "exhausted"
    assert queue.counts()["pending"] == 50
