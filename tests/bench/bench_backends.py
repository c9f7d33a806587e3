"""Claims on both backends, side by side: latency and throughput with 1 and 4 processes.

    python -m tests.bench.bench_backends [--rows 100000] [--claims 400]
                                         [--processes 1 4] [--backends sqlite postgres]

For each backend and process count: a fresh store (a SQLite file in WAL mode with
synchronous=FULL, or a throwaway PostgreSQL database on the local server, as the tests
make), its ledger pre-filled with ``--rows`` settled rows over the last six days (all
inside the weekly window), and ``processes × claims`` pending mentions on distinct pull
requests. Then ``processes`` worker processes, released together, each loop: one claim
through the real ``QueueDriver.claim`` with the governor's ``admit`` (the window sums
under the budget lock, a reservation), one settle, one finish — what a worker does,
without the engine. A claim the store calls contention (SQLite's busy timeout, a
PostgreSQL lock wait) is retried and its wait counted in its latency.

Then the admission alone, the choice docs/STORAGE.md records: ``processes`` processes
each reading the three window sums and inserting a reservation, serialised either by a
transaction-scoped advisory lock (what the governor does) or by SERIALIZABLE isolation
retried on a serialization failure; per variant the admissions per second, p50/p99 and
the retries.

The last line is every figure as JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.budget.windows import WINDOWS
from service.config.schema import BudgetConfig
from service.model.jobs import Job
from service.storage.database import Database
from service.storage.errors import is_contention
from service.storage.ledger_windows import WINDOW_SQL, window_params, windows_sql
from service.storage.postgres import PostgresStore, translate_placeholders
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
CONFIG = BudgetConfig(enabled=True, session_tokens=10**12, weekly_tokens=10**13,
                      max_run_tokens=50_000, reviewer_share_pct=100)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(len(ordered) * pct / 100) - 1))]


@contextmanager
def backend_target(backend: str, directory: Path) -> Iterator[str]:
    """Where the store lives: a file path, or a throwaway database's conninfo."""
    if backend == "sqlite":
        yield str(directory / "bench.db")
        return
    from tests.databases import throwaway_database
    with throwaway_database() as conninfo:
        yield conninfo


def open_target(backend: str, target: str) -> Database:
    return SqliteStore(target) if backend == "sqlite" else PostgresStore(target)


def fill(store: Database, rows: int, pending: int, conninfo: str | None = None) -> None:
    """``rows`` settled ledger rows and ``pending`` mentions; on PostgreSQL (``conninfo``)
    then VACUUM, as autovacuum would have long since: one bulk insert leaves a dead
    version of ``ledger_hours``' rows per ledger row, which no real store accumulates."""
    span = timedelta(days=6).total_seconds()
    with store.transaction() as tx:
        tx.executemany(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
            " used_tokens, usage_confidence, engine, reserved_at, settled_at, stop_reason)"
            " VALUES (?, 'old', 1, 'full', 50000, ?, 'exact', 'fake', ?, ?, 'completed')",
            [(f"mention:o/old:{i}:{i}", 1000 + i % 5000,
              to_db_time(NOW - timedelta(seconds=span * (i + 1) / rows)),
              to_db_time(NOW - timedelta(seconds=span * (i + 1) / rows)))
             for i in range(rows)])
    queue = QueueDriver(store)
    queue.enqueue_many([(Job(kind="mention", repo="o/r", pr_number=1_000 + n, actor_id=5,
                             comment_id=n + 1, comment_source="issue"), NOW)
                        for n in range(pending)])
    if conninfo is None:
        with store.transaction() as tx:
            tx.execute("ANALYZE")
        return
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


# -- the claim cycle (one worker process) ------------------------------------------------------


def claim_worker(backend: str, target: str, claims: int, index: int,
                 start: Any, out: Any) -> None:
    store = open_target(backend, target)
    queue = QueueDriver(store)
    governor = Governor(store, CONFIG, publish=False)
    owner = f"bench:{os.getpid()}:{index}"
    latencies: list[float] = []
    retries = 0
    start.wait()
    for i in range(claims):
        now = NOW + timedelta(milliseconds=i)
        began = time.perf_counter()
        while True:
            try:
                claim = queue.claim(now=now, owner=owner, admit=governor.admit)
                break
            except Exception as exc:
                if not is_contention(exc):
                    raise
                retries += 1
        latencies.append(time.perf_counter() - began)
        if claim is None:
            break
        governor.settle(claim, Usage(1234, "exact", "fake", None), now=now)
        queue.finish(claim.dedupe_key, claim.lease.owner)
    store.close()
    out.put((latencies, retries))


def race(processes: int, worker: Callable[..., None], *args: Any
         ) -> tuple[list[tuple[list[float], int]], float]:
    """``processes`` spawned ``worker(*args, index, start, out)`` released together; each
    puts (latencies, retries). Their results, and the seconds from release to the last."""
    context = multiprocessing.get_context("spawn")
    start, out = context.Event(), context.Queue()
    workers = [context.Process(target=worker, args=(*args, i, start, out))
               for i in range(processes)]
    for each in workers:
        each.start()
    time.sleep(2.0)  # every child has connected and waits on the event
    began = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in workers]
    elapsed = time.perf_counter() - began
    for each in workers:
        each.join(timeout=60)
    return results, elapsed


def summary(results: list[tuple[list[float], int]], elapsed: float) -> dict[str, Any]:
    latencies = [t for lats, _ in results for t in lats]
    return {"count": len(latencies), "per_s": len(latencies) / elapsed,
            "p50_ms": percentile(latencies, 50) * 1000,
            "p99_ms": percentile(latencies, 99) * 1000,
            "retries": sum(r for _, r in results)}


def run_claims(backend: str, rows: int, processes: int, claims: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, backend_target(backend, Path(tmp)) as target:
        store = open_target(backend, target)
        fill(store, rows, processes * claims, None if backend == "sqlite" else target)
        store.close()
        figures = summary(*race(processes, claim_worker, backend, target, claims))
    return {"backend": backend, "rows": rows, "processes": processes,
            "claims": figures["count"], "claims_per_s": figures["per_s"], **{
                k: figures[k] for k in ("p50_ms", "p99_ms", "retries")}}


# -- the floor: the fewest round trips a claim can take ---------------------------------------

_FLOOR_ROW = ("SELECT dedupe_key, repo, pr_number, actor_id FROM queue WHERE status = 'pending'"
              " ORDER BY enqueued_at, dedupe_key LIMIT 1 FOR UPDATE SKIP LOCKED")
_FLOOR_RESERVE = ("INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                  " reserved_at, repo, pr_number) VALUES (%s, %s, %s, 'full', 50000, %s, %s, %s)")


def floor_worker(conninfo: str, claims: int, index: int, start: Any, out: Any) -> None:
    """A claim cut to what no design with a serialised admission can do without, in raw
    psycopg, pipelined: (1) BEGIN, the shared write lock and the oldest row taken with
    SKIP LOCKED and its pull request's lock; (2) the budget's lock and the three windows;
    (3) the reservation, the lease and the COMMIT — three round trips. Then the settle and
    finish in one pipelined transaction (the budget's lock first, as the governor takes it).
    No abandonment, recovery, policy, breaker or pacer: a lower bound, not a claim."""
    owner = f"floor{index}"
    windows = translate_placeholders(windows_sql(len(WINDOWS)))
    latencies: list[float] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        start.wait()
        for i in range(claims):
            now = NOW + timedelta(milliseconds=i)
            stamp = to_db_time(now)
            params = {f"{name}_{k}": value for k, window in enumerate(WINDOWS)
                      for name, value in window_params(now - window.duration).items()}
            began = time.perf_counter()
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock_shared(1)")
                row = conn.execute(_FLOOR_ROW).fetchone()
                if row is None:
                    conn.execute("ROLLBACK")
                    break
                key, repo, pr, actor = row
                conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s))", (f"{repo}#{pr}",))
                conn.execute("SELECT pg_advisory_xact_lock(2)")
                conn.execute(windows, params).fetchall()
                conn.execute(_FLOOR_RESERVE, (key, owner, actor, stamp, repo, pr))
                conn.execute("UPDATE queue SET status = 'claimed', owner = %s,"
                             " leased_until = %s, attempts = attempts + 1"
                             " WHERE dedupe_key = %s",
                             (owner, to_db_time(now + timedelta(minutes=20)), key))
                conn.execute("COMMIT")
            latencies.append(time.perf_counter() - began)
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute("SELECT pg_advisory_xact_lock_shared(1)")
                conn.execute("SELECT pg_advisory_xact_lock(2)")
                conn.execute("UPDATE ledger SET used_tokens = 1234, settled_at = %s,"
                             " stop_reason = 'completed' WHERE dedupe_key = %s"
                             " AND settled_at IS NULL", (stamp, key))
                conn.execute("UPDATE queue SET status = 'done', leased_until = NULL"
                             " WHERE dedupe_key = %s", (key,))
                conn.execute("COMMIT")
    out.put((latencies, 0))


def run_floor(rows: int, processes: int, claims: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, backend_target("postgres", Path(tmp)) as target:
        store = open_target("postgres", target)
        fill(store, rows, processes * claims, target)
        store.close()
        figures = summary(*race(processes, floor_worker, target, claims))
    return {"variant": "floor", "rows": rows, "processes": processes,
            "claims_per_s": figures["per_s"], **{k: figures[k] for k in ("p50_ms", "p99_ms")}}


# -- the admission alone: advisory lock or SERIALIZABLE ------------------------------------------


def admission_worker(conninfo: str, variant: str, count: int, index: int,
                     start: Any, out: Any) -> None:
    from psycopg.errors import SerializationFailure

    latencies: list[float] = []
    retries = 0
    with psycopg.connect(conninfo, autocommit=True) as conn:
        start.wait()
        for i in range(count):
            now = NOW + timedelta(milliseconds=i)
            began = time.perf_counter()
            while True:
                try:
                    if variant == "serializable":
                        conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
                    else:
                        conn.execute("BEGIN")
                        conn.execute("SELECT pg_advisory_xact_lock(42)")
                    for window in WINDOWS:
                        conn.execute(translate_placeholders(WINDOW_SQL),
                                     window_params(now - window.duration))
                    conn.execute(
                        "INSERT INTO ledger (dedupe_key, owner, actor_id, mode,"
                        " reserved_tokens, reserved_at) VALUES (%s, %s, 5, 'full', 50000, %s)",
                        (f"mention:o/r:{index}:{i}", f"w{index}", to_db_time(now)))
                    conn.execute("COMMIT")
                    break
                except SerializationFailure:
                    conn.execute("ROLLBACK")
                    retries += 1
            latencies.append(time.perf_counter() - began)
    out.put((latencies, retries))


def run_admissions(variant: str, rows: int, processes: int, count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, backend_target("postgres", Path(tmp)) as target:
        store = open_target("postgres", target)
        fill(store, rows, 0, target)
        store.close()
        figures = summary(*race(processes, admission_worker, target, variant, count))
    return {"variant": variant, "rows": rows, "processes": processes,
            "admissions_per_s": figures["per_s"], **{
                k: figures[k] for k in ("p50_ms", "p99_ms", "retries")}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--claims", type=int, default=400, help="per process")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"])
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.rows} ledger rows "
          f"in the window; {args.claims} claims per process; latency in ms")
    print(f"{'backend':>10} {'procs':>5} {'claims/s':>9} {'p50':>7} {'p99':>7} {'retries':>8}")
    figures: list[dict[str, Any]] = []
    for processes in args.processes:
        for backend in args.backends:
            r = run_claims(backend, args.rows, processes, args.claims)
            figures.append(r)
            print(f"{backend:>10} {processes:>5} {r['claims_per_s']:>9.0f} {r['p50_ms']:>7.2f} "
                  f"{r['p99_ms']:>7.2f} {r['retries']:>8}")
    if "postgres" in args.backends:
        print("admission alone on PostgreSQL (window sums + a reservation):")
        print(f"{'variant':>13} {'procs':>5} {'adm/s':>9} {'p50':>7} {'p99':>7} {'retries':>8}")
        for variant in ("advisory", "serializable"):
            processes = max(args.processes)
            r = run_admissions(variant, args.rows, processes, args.claims)
            figures.append(r)
            print(f"{variant:>13} {processes:>5} {r['admissions_per_s']:>9.0f} "
                  f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['retries']:>8}")
    if "postgres" in args.backends:
        print("the floor on PostgreSQL (three round trips a claim; see floor_worker):")
        print(f"{'variant':>13} {'procs':>5} {'claims/s':>9} {'p50':>7} {'p99':>7}")
        for processes in args.processes:
            r = run_floor(args.rows, processes, args.claims)
            figures.append(r)
            print(f"{'floor':>13} {processes:>5} {r['claims_per_s']:>9.0f} "
                  f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
