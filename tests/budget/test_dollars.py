"""Dollars: the reported cost of each run, spend per window, and the monthly dollar cap."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

from service.budget.dollars import costs_since
from service.budget.governor import Governor
from service.budget.ladder import Mode
from service.budget.usage import Usage
from service.storage.database import Database
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.kit.thorough import examples
from tests.queue_helpers import LEASE, T0, budget, mention, opened


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def run(queue: QueueDriver, gov: Governor, now: datetime, pr: int, tokens: int,
        cost: float | None) -> Claim:
    queue.enqueue(mention(pr, pr), now=now)
    c = queue.claim(now=now, owner="w", admit=gov.admit)
    assert c is not None
    assert gov.settle(c, Usage(tokens, "exact", "claude_code", "m", cost_usd=cost), now=now)
    assert queue.finish(c.dedupe_key, c.lease.owner)
    return c


# -- Usage and the ledger ---------------------------------------------------------------------

@pytest.mark.parametrize("bad", [-0.01, float("nan"), float("inf"), True, "1.5"])
def test_usage_refuses_a_cost_that_is_not_a_dollar_amount(bad: object) -> None:
    with pytest.raises(ValueError, match="cost_usd"):
        Usage(1, "exact", "e", None, cost_usd=bad)  # type: ignore[arg-type]


def test_the_four_original_fields_keep_their_positions() -> None:
    u = Usage(12, "estimated", "engine", "model")
    assert (u.tokens, u.confidence, u.engine, u.model, u.cost_usd) == (
        12, "estimated", "engine", "model", None)


def test_settle_stores_the_cost_and_the_windows_show_it(store: SqliteStore) -> None:
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    run(queue, gov, T0 - timedelta(days=2), 1, 1_000, 0.25)     # weekly only
    run(queue, gov, T0 - timedelta(hours=10), 2, 1_000, 0.125)  # daily and weekly
    run(queue, gov, T0 - timedelta(hours=1), 3, 1_000, 0.0625)  # all three
    run(queue, gov, T0 - timedelta(minutes=30), 4, 1_000, None)  # reported nothing
    with store.read() as conn:
        costs = [r[0] for r in conn.execute("SELECT cost_usd FROM ledger ORDER BY id")]
    assert costs == [0.25, 0.125, 0.0625, None]
    body = gov.snapshot(T0).as_json()
    spent = {w["name"]: w["spent_usd"] for w in body["windows"]}  # type: ignore[attr-defined]
    assert spent == {"session": 0.0625, "daily": 0.1875, "weekly": 0.4375}
    json.dumps(body)  # GET /budget serialises it as is


# -- the aggregate is the plain sum, cheaper ---------------------------------------------------

ROWS = st.lists(st.tuples(
    st.integers(-31 * 24 * 60, 60),                        # minutes from T0
    st.integers(1, 50_000),                                # reserved
    st.one_of(st.none(), st.integers(0, 60_000)),          # used (None = open)
    st.one_of(st.none(), st.floats(0, 5, allow_nan=False)),  # cost
    st.integers(0, 59_999_999),                            # microseconds in the minute
), max_size=30)


@settings(max_examples=examples(120), deadline=None)
@given(ledger=ROWS, offset=st.integers(-600, 600), rewrite=st.booleans())
def test_costs_since_equals_the_plain_sum_for_any_ledger(
        ledger: list[tuple[int, int, int | None, float | None, int]], offset: int,
        rewrite: bool) -> None:
    with tempfile.TemporaryDirectory() as d, new_sqlite_store(Path(d) / "s.db") as store:
        with store.transaction() as conn:
            for i, (minute, reserved, used, cost, micros) in enumerate(ledger):
                at = to_db_time(T0 + timedelta(minutes=minute, microseconds=micros))
                conn.execute(
                    "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                    " used_tokens, reserved_at, settled_at, cost_usd)"
                    " VALUES (?, 'o', 1, 'full', ?, ?, ?, ?, ?)",
                    (f"k{i}", reserved, used, at, None if used is None else at, cost))
        if rewrite:  # settles, re-pricings and deletions all go through the triggers
            with store.transaction() as conn:
                conn.execute("UPDATE ledger SET used_tokens = reserved_tokens / 3,"
                             " cost_usd = 0.5, settled_at = reserved_at WHERE id % 3 = 0")
                conn.execute("UPDATE ledger SET cost_usd = NULL WHERE id % 3 = 1")
                conn.execute("DELETE FROM ledger WHERE id % 5 = 4")
        now = T0 + timedelta(seconds=offset * 37)
        for start in (now - timedelta(hours=5), now - timedelta(days=30)):
            with store.read() as conn:
                got = costs_since(conn, start)
                plain = conn.execute(
                    "SELECT COALESCE(SUM(CAST(round(cost_usd * 1000000) AS INTEGER)), 0),"
                    " COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0), COUNT(*)"
                    " FROM ledger WHERE cost_usd IS NOT NULL AND reserved_at > ?",
                    (to_db_time(start),)).fetchone()
            assert (got.micro_usd, got.tokens, got.runs) == tuple(plain)


def test_the_cost_query_reads_hours_not_rows(sqlite_store: SqliteStore) -> None:
    store = sqlite_store  # the plan is SQLite's
    from service.storage.ledger_windows import COSTS_SQL, window_params
    with store.read() as conn:
        plan = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + COSTS_SQL,
                                                     window_params(T0)))
    assert "ledger_cost_hours" in plan and "SCAN ledger" not in plan


# -- the monthly cap --------------------------------------------------------------------------

def test_without_priced_runs_a_run_is_estimated_at_the_default_rate(store: SqliteStore) -> None:
    # 10 000 tokens at $15 per million: $0.15 a run; $1.00 pays for six reservations.
    config = budget(max_run_tokens=10_000, monthly_usd=1.0)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    for n in range(1, 9):
        queue.enqueue(mention(n, n), now=T0)
    held = 0
    while queue.claim(now=T0, owner=f"w{held}", admit=gov.admit) is not None:
        held += 1
    assert held == 6
    refusal = gov.last_refusal
    assert refusal is not None and (refusal.reason, refusal.window) == ("monthly_usd", "monthly")
    assert refusal.frees_at == T0 + timedelta(days=30)
    monthly = gov.snapshot(T0).as_json()["monthly"]
    assert monthly == {
        "limit_usd": 1.0, "spent_usd": 0.0, "unpriced_usd": 0.0, "reserved_usd": 0.9,
        "remaining_usd": 0.1, "run_estimate_usd": 0.15, "usd_per_million_tokens": 15.0,
        "rate_source": "default", "priced_runs": 0,
        "frees_at": (T0 + timedelta(days=30)).isoformat(),
    }


def test_the_rate_is_observed_once_five_runs_reported_a_cost(store: SqliteStore) -> None:
    config = budget(max_run_tokens=10_000, monthly_usd=100.0)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    for n in range(1, 5):  # $0.02 for 4 000 tokens: $5 per million
        run(queue, gov, T0 - timedelta(days=1, minutes=n), n, 4_000, 0.02)
    assert gov.snapshot(T0).monthly.rate.observed is False  # type: ignore[union-attr]
    run(queue, gov, T0 - timedelta(days=1), 5, 4_000, 0.02)
    monthly = gov.snapshot(T0).as_json()["monthly"]
    assert monthly["rate_source"] == "observed"  # type: ignore[index]
    assert monthly["usd_per_million_tokens"] == 5.0  # type: ignore[index]
    assert monthly["run_estimate_usd"] == 0.05  # type: ignore[index]
    assert monthly["spent_usd"] == 0.1  # type: ignore[index]


def test_runs_without_a_reported_cost_are_charged_at_the_rate(store: SqliteStore) -> None:
    config = budget(max_run_tokens=10_000, monthly_usd=0.5)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    run(queue, gov, T0 - timedelta(days=3), 1, 20_000 // 2, None)  # 10 000 tokens: $0.15
    run(queue, gov, T0 - timedelta(days=2), 2, 10_000, 0.04)
    monthly = gov.snapshot(T0).monthly
    assert monthly is not None
    assert (monthly.spent_micro, monthly.unpriced_micro) == (40_000, 150_000)
    # $0.50 − $0.19 = $0.31 left: two more runs fit at $0.15, the third does not.
    for n in range(3, 6):
        queue.enqueue(mention(n, n), now=T0)
    assert queue.claim(now=T0, owner="a", admit=gov.admit) is not None
    assert queue.claim(now=T0, owner="b", admit=gov.admit) is not None
    assert queue.claim(now=T0, owner="c", admit=gov.admit) is None
    # Thirty days after the first run, its charge has left the window.
    assert queue.claim(now=T0 + timedelta(days=27, seconds=1), owner="c", admit=gov.admit)


def test_the_dollar_window_is_on_the_ladder(store: SqliteStore) -> None:
    config = budget(max_run_tokens=10_000, monthly_usd=1.0)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    run(queue, gov, T0 - timedelta(days=1), 1, 1_000, 0.6)
    assert gov.snapshot(T0).mode is Mode.REDUCED
    run(queue, gov, T0 - timedelta(hours=23), 2, 1_000, 0.25)
    assert gov.snapshot(T0).mode is Mode.MENTION_ONLY
    queue.enqueue(opened(3), now=T0)
    queue.enqueue(mention(4, 4), now=T0 + timedelta(seconds=1))
    c = queue.claim(now=T0 + timedelta(seconds=2), owner="w", admit=gov.admit)
    assert c is not None and c.job.kind == "mention"
    refusal = gov.refusals["pr_opened:o/r:3:" + "a" * 40]
    assert (refusal.reason, refusal.window) == ("mention_only", "monthly")
    gov.settle(c, Usage(1_000, "exact", "e", None, cost_usd=0.2), now=T0)
    assert gov.snapshot(T0).mode is Mode.EXHAUSTED
    queue.enqueue(mention(5, 5), now=T0)
    assert queue.claim(now=T0, owner="w", admit=gov.admit) is None
    assert gov.last_refusal is not None and gov.last_refusal.reason == "monthly_usd"


def test_without_a_monthly_cap_dollars_are_shown_but_never_refuse(store: SqliteStore) -> None:
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    run(queue, gov, T0 - timedelta(days=1), 1, 1_000, 500.0)
    snap = gov.snapshot(T0)
    assert snap.mode is Mode.FULL
    monthly = snap.as_json()["monthly"]
    assert monthly["limit_usd"] is None and monthly["remaining_usd"] is None  # type: ignore[index]
    assert monthly["spent_usd"] == 500.0  # type: ignore[index]
    run(queue, gov, T0, 2, 1_000, None)
