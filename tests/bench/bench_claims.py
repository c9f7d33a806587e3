"""Claims through the governor: cycles per second and claim latency at ledger sizes.

    python -m tests.bench.bench_claims [--rows 10000 100000] [--cycles 2000]

Each cycle is one claim (with admit: three window measurements and a reservation, one
BEGIN IMMEDIATE), one settle and one finish, on a real file with synchronous=FULL. The
ledger is pre-filled with ROWS settled rows spread over the last six days, so every row
is inside the weekly window and the measurement scans all of them. Prints the query
plan of the window query, then one line per size.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.budget.windows import WINDOWS
from service.config.schema import BudgetConfig
from service.model.jobs import Job
from service.storage.ledger_windows import WINDOW_SQL, window_params
from service.storage.queue_enqueue import enqueue
from service.storage.queue_lease import CLAIMABLE_SQL
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver

PLAIN = ("SELECT COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) FROM ledger"
         " WHERE reserved_at > ?")
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CONFIG = BudgetConfig(enabled=True, session_tokens=10**12, weekly_tokens=10**13,
                      max_run_tokens=50_000, reviewer_share_pct=40)


def fill(store: SqliteStore, rows: int) -> None:
    span = timedelta(days=6).total_seconds()
    with store.transaction() as conn:
        conn.executemany(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
            " used_tokens, usage_confidence, engine, reserved_at, settled_at, stop_reason)"
            " VALUES (?, 'old', 1, 'full', 50000, ?, 'exact', 'fake', ?, ?, 'completed')",
            ((f"mention:o/r:{i}:{i}", 1000 + i % 5000,
              to_db_time(NOW - timedelta(seconds=span * (i + 1) / rows)),
              to_db_time(NOW - timedelta(seconds=span * (i + 1) / rows)))
             for i in range(rows)),
        )
        conn.execute("ANALYZE")


def run(rows: int, cycles: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d, SqliteStore(Path(d) / "bench.db") as store:
        fill(store, rows)
        queue = QueueDriver(store)
        gov = Governor(store, CONFIG)
        with store.transaction() as conn:
            for n in range(cycles):
                enqueue(conn, Job(kind="mention", repo="o/r", pr_number=100_000 + n,
                                  actor_id=5, comment_id=n + 1, comment_source="issue"),
                        now=NOW)
        latencies = []
        start = time.perf_counter()
        for i in range(cycles):
            now = NOW + timedelta(milliseconds=i)
            t = time.perf_counter()
            claim = queue.claim(now=now, owner="bench:1:0", admit=gov.admit)
            latencies.append(time.perf_counter() - t)
            assert claim is not None
            gov.settle(claim, Usage(1234, "exact", "fake", None), now=now)
            queue.finish(claim.dedupe_key, claim.lease.owner)
        elapsed = time.perf_counter() - start
        latencies.sort()
        # For comparison: the same three window sums read straight off the ledger rows.
        plain = []
        with store.read() as conn:
            for _ in range(50):
                t = time.perf_counter()
                for window in WINDOWS:
                    conn.execute(PLAIN, (to_db_time(NOW - window.duration),)).fetchone()
                plain.append(time.perf_counter() - t)
        return {
            "plain_ms": statistics.median(plain) * 1000,
            "rows": rows,
            "cycles_per_s": cycles / elapsed,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        }


def plans() -> None:
    with tempfile.TemporaryDirectory() as d, SqliteStore(Path(d) / "plan.db") as store:
        with store.read() as conn:
            for name, sql, params in (
                ("window", WINDOW_SQL, window_params(NOW)),
                ("claimable", CLAIMABLE_SQL, {"now": to_db_time(NOW), "max_attempts": 3}),
            ):
                print(f"EXPLAIN QUERY PLAN ({name} query):")
                for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params):
                    print("   ", row[3])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--cycles", type=int, default=2_000)
    args = parser.parse_args()
    plans()
    for rows in args.rows:
        r = run(rows, args.cycles)
        print(f"ledger rows in window {r['rows']:>7}: {r['cycles_per_s']:8.0f} cycles/s  "
              f"claim p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  "
              f"(three windows summed row by row instead: {r['plain_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
