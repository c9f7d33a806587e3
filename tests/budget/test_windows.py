"""The window query is the plain ledger sum, only cheaper; and the plans stay indexed."""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import given, settings

from service.budget.windows import WINDOWS, measure
from service.storage.ledger_windows import WINDOW_SQL, window_params
from service.storage.queue_lease import CLAIMABLE_SQL
from service.storage.times import to_db_time
from tests.kit.stores import new_sqlite_store
from tests.kit.thorough import examples
from tests.queue_helpers import T0, budget

PLAIN = ("SELECT COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) FROM ledger"
         " WHERE reserved_at > ?")

rows = st.lists(st.tuples(
    st.integers(-8 * 24 * 60, 60),           # minutes from T0 it was reserved at
    st.integers(0, 50_000),                   # reserved
    st.one_of(st.none(), st.integers(0, 60_000)),  # used (None = still open)
    st.integers(0, 59_999_999),               # microseconds, to land anywhere in a minute
), max_size=40)


@settings(max_examples=examples(150), deadline=None)
@given(ledger=rows, offset=st.integers(-600, 600), settle_some=st.booleans())
def test_measure_equals_the_plain_sum_for_any_ledger(
        ledger: list[tuple[int, int, int | None, int]], offset: int, settle_some: bool) -> None:
    with tempfile.TemporaryDirectory() as d, new_sqlite_store(Path(d) / "s.db") as store:
        with store.transaction() as conn:
            for i, (minute, reserved, used, micros) in enumerate(ledger):
                at = T0 + timedelta(minutes=minute, microseconds=micros % 60_000_000)
                conn.execute(
                    "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                    " used_tokens, reserved_at, settled_at) VALUES (?, 'o', 1, 'full', ?, ?, ?, ?)",
                    (f"k{i}", reserved, used, to_db_time(at),
                     None if used is None else to_db_time(at)))
        if settle_some:  # updates go through the triggers too
            with store.transaction() as conn:
                conn.execute("UPDATE ledger SET used_tokens = reserved_tokens / 2,"
                             " settled_at = reserved_at WHERE settled_at IS NULL AND id % 2 = 0")
        now = T0 + timedelta(seconds=offset * 37)
        with store.read() as conn:
            states = measure(conn, now, budget())
            for window, state in zip(WINDOWS, states, strict=True):
                start = to_db_time(now - window.duration)
                (plain,) = conn.execute(PLAIN, (start,)).fetchone()
                (open_,) = conn.execute(
                    "SELECT COALESCE(SUM(reserved_tokens), 0) FROM ledger"
                    " WHERE settled_at IS NULL AND reserved_at > ?", (start,)).fetchone()
                assert state.charged == plain
                assert state.reserved == open_


def test_the_claim_and_window_queries_are_served_by_indexes(tmp_path: Path) -> None:
    with new_sqlite_store(tmp_path / "s.db") as store, store.read() as conn:
        claim_plan = " | ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN " + CLAIMABLE_SQL, {"now": to_db_time(T0), "max_attempts": 3}))
        window_plan = " | ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN " + WINDOW_SQL, window_params(T0)))
    # FIFO straight off the partial index of live rows: no done rows read, no sort.
    assert "USING INDEX queue_live" in claim_plan
    assert "TEMP B-TREE" not in claim_plan
    assert "queue_leases" in claim_plan
    assert "ledger_hours" in window_plan and "ledger_open_window" in window_plan
    assert "SCAN ledger" not in window_plan
