"""No interleaving of threads or processes on one file can make the ledger over-admit.

Each admitted claim is checked inside its own transaction (every window at or under its
limit, at most one open reservation per key), not only at the end; afterwards every
trailing window ending at every reservation instant is checked again from the ledger.
"""

from __future__ import annotations

import bisect
import multiprocessing
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.budget.windows import WINDOWS, limit_of, measure
from service.config.schema import BudgetConfig
from service.storage.errors import STORE_ERRORS, is_contention
from service.storage.postgres import PostgresStore
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from service.storage.times import from_db_time
from tests.databases import throwaway_database
from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0, mention

# Small limits so that the windows fill, refuse and free many times over the run.
CONFIG = BudgetConfig(enabled=True, session_tokens=50_000, weekly_tokens=700_000,
                      max_run_tokens=4_000, reviewer_share_pct=100)
TICK = timedelta(minutes=3)  # fake time advances this much per claim attempt
#: More admissions than the session window could ever hold twice over, each reserving a
#: whole run: reached only if the windows filled and freed again and again. How many more
#: depends on how the processes interleave (a loaded machine changes it), so the bound
#: is what the ledger allows, not a count seen on a quiet one.
FREED_TWICE = 2 * (CONFIG.session_tokens // CONFIG.max_run_tokens)


def checked_admit(gov: Governor, config: BudgetConfig, violations: list[str]
                  ) -> Callable[[sqlite3.Connection, Claim, datetime], bool]:
    """``gov.admit``, then the invariants read back in the same transaction."""

    def admit(conn: sqlite3.Connection, claim: Claim, now: datetime) -> bool:
        ok = gov.admit(conn, claim, now)
        if ok:
            for w in measure(conn, now, config):
                if w.charged > w.limit:
                    violations.append(f"{w.name} {w.charged} > {w.limit} at {now}")
            (open_rows,) = conn.execute(
                "SELECT COUNT(*) FROM ledger WHERE dedupe_key = ? AND settled_at IS NULL",
                (claim.dedupe_key,)).fetchone()
            if open_rows != 1:
                violations.append(f"{open_rows} open reservations for {claim.dedupe_key}")
        return ok

    return admit


def open_at(where: str | Path) -> SqliteStore | PostgresStore:
    """The store at ``where``: a SQLite file's path, or a PostgreSQL conninfo."""
    text = str(where)
    return PostgresStore(text) if "dbname=" in text else SqliteStore(text)


def sliding_window_violations(path: str | Path, config: BudgetConfig) -> list[str]:
    """Every trailing window that ends at a reservation instant, from the final ledger."""
    con = open_at(path)
    try:
        with con.read() as tx:
            rows = [(from_db_time(at), int(c)) for at, c in tx.execute(
                "SELECT reserved_at, COALESCE(used_tokens, reserved_tokens) FROM ledger"
                " ORDER BY reserved_at")]
    finally:
        con.close()
    times = [at for at, _ in rows]
    prefix = [0]
    for _, c in rows:
        prefix.append(prefix[-1] + c)
    bad = []
    for i, end in enumerate(times):
        last = bisect.bisect_right(times, end)  # rows at the same instant count too
        for window in WINDOWS:
            first = bisect.bisect_right(times, end - window.duration)
            total = prefix[last] - prefix[first]
            if total > limit_of(window, config):
                bad.append(f"{window.name} ending {end} (row {i}): {total}")
    return bad


T = TypeVar("T")


def drive(path: str | Path, worker: int, claims: int, tick: Callable[[], datetime],
          violations: list[str]) -> int:
    """One worker: claim, settle at a random-ish fraction, finish. Returns admitted count."""
    admitted = 0
    with open_at(path) as store:
        queue = QueueDriver(store, lease=timedelta(minutes=20))
        # Its construction writes too (the shared policy row, once): it may meet the lock
        # like any other write while the other workers are already claiming.
        gov = retry_on_contention(lambda: Governor(store, CONFIG))
        admit = checked_admit(gov, CONFIG, violations)
        for i in range(claims):
            now = tick()
            # A claim that met the lock is tried again, as the pool does after its nap:
            # every one of the ``claims`` is made, so how many are admitted does not
            # depend on how often the threads collided.
            c = retry_on_contention(lambda now=now: queue.claim(
                now=now, owner=f"w{worker}", admit=admit))
            if c is None:
                continue
            admitted += 1
            # Every seventh run "crashes": its reservation stays open and charged.
            if (worker + i) % 7 == 0:
                continue
            used = (worker * 997 + i * 131) % (CONFIG.max_run_tokens + 1)
            retry_on_contention(lambda c=c, used=used, now=now: gov.settle(
                c, Usage(used, "exact", "fake", None), now=now))
            retry_on_contention(lambda c=c: queue.finish(c.dedupe_key, c.lease.owner))
    return admitted


def retry_on_contention(op: Callable[[], T]) -> T:
    """What a worker does with a write that met the lock: try again (it must land)."""
    for _ in range(50):
        try:
            return op()
        except STORE_ERRORS as exc:
            if not is_contention(exc):
                raise
    raise AssertionError("the store stayed locked for 50 busy timeouts")


def seed(path: str | Path, count: int) -> None:
    with open_at(path) as store:
        queue = QueueDriver(store)
        for n in range(count):
            queue.enqueue(mention(n + 1, n + 1), now=T0 - timedelta(days=1))


@pytest.mark.slow(10)
def test_threads_never_breach_a_window(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    seed(path, 3_000)
    lock = threading.Lock()
    ticks = [0]

    def tick() -> datetime:
        with lock:
            ticks[0] += 1
            return T0 + ticks[0] * TICK

    violations: list[str] = []
    results: list[int] = []
    errors: list[BaseException] = []

    def run(w: int) -> None:
        try:
            results.append(drive(path, w, 750, tick, violations))
        except BaseException as exc:  # surfaced below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert violations == []
    assert sliding_window_violations(path, CONFIG) == []
    assert sum(results) > FREED_TWICE  # the windows filled and freed many times


def _process_main(path: str, worker: int, claims: int, counter: object, lock: object,
                  out: object) -> None:
    def tick() -> datetime:
        with lock:  # type: ignore[attr-defined]
            counter.value += 1  # type: ignore[attr-defined]
            return T0 + counter.value * TICK  # type: ignore[attr-defined]

    violations: list[str] = []
    admitted = drive(path, worker, claims, tick, violations)
    out.put((worker, admitted, violations))  # type: ignore[attr-defined]


def race_four_processes(where: str, claims: int) -> None:
    """Four processes race ``claims`` claims each against the store at ``where``; every
    invariant is checked, in each admission and on the final ledger."""
    ctx = multiprocessing.get_context("spawn")
    counter = ctx.Value("q", 0, lock=False)
    lock = ctx.Lock()
    out = ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(where, w, claims, counter, lock, out))
             for w in range(4)]
    for p in procs:
        p.start()
    reports = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    out.close()
    out.join_thread()
    assert [v for _, _, v in reports if v] == []
    assert sum(a for _, a, _ in reports) > FREED_TWICE
    assert sliding_window_violations(where, CONFIG) == []
    with open_at(where) as store, store.read() as tx:
        (dup,) = tx.execute(
            "SELECT COUNT(*) FROM (SELECT dedupe_key FROM ledger WHERE settled_at IS NULL"
            " GROUP BY dedupe_key HAVING COUNT(*) > 1) AS open_twice").fetchone()
    assert dup == 0


def test_four_processes_on_one_file_never_breach_a_window(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    seed(path, 3_000)
    race_four_processes(str(path), 500)


@pytest.mark.slow(15)
def test_four_processes_on_one_postgresql_database_never_breach_a_window() -> None:
    """The same race across processes that share one PostgreSQL database, as replicas on
    several hosts do: the one advisory write lock serialises every admission."""
    with throwaway_database() as conninfo:
        seed(conninfo, 2_000)
        race_four_processes(conninfo, 300)
