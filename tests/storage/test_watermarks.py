"""Watermarks: forward only, per repository, legacy rows adopted once per store."""

from __future__ import annotations

import multiprocessing
import random
import sqlite3
import threading
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import psycopg
import pytest

from service.storage.database import Database
from service.storage.postgres import PostgresStore
from service.storage.sqlite import SqliteStore
from service.storage.times import from_db_time, to_db_time
from service.storage.watermarks import Watermarks, search_key, watermark_key
from tests.databases import throwaway_database

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
KEY = "comments:o/r"


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def put_raw(store: SqliteStore, name: str, at: str) -> None:
    """Write a row as older code would have, bypassing every check."""
    with store.transaction() as conn:
        conn.execute("INSERT INTO watermarks (name, at) VALUES (?, ?)"
                     " ON CONFLICT (name) DO UPDATE SET at = excluded.at", (name, at))


def names(store: SqliteStore) -> dict[str, str]:
    with store.read() as conn:
        return dict(conn.execute("SELECT name, at FROM watermarks"))


# -- keys and single writers ----------------------------------------------------------------


def test_watermark_key() -> None:
    assert watermark_key("comments", "o/r") == "comments:o/r"
    assert (
        watermark_key("pull_requests", "my-org/repo.name_2") == "pull_requests:my-org/repo.name_2"
    )


@pytest.mark.parametrize(
    ("stream", "repo"),
    [("", "o/r"), ("a:b", "o/r"), ("comments", "or"), ("comments", "o/r/x"), ("comments", "o/")],
)
def test_watermark_key_rejects_malformed_parts(stream: str, repo: str) -> None:
    with pytest.raises(ValueError, match="must be"):
        watermark_key(stream, repo)


def test_advance_only_moves_forward(store: SqliteStore) -> None:
    assert Watermarks(store).get(KEY) is None
    assert Watermarks(store).advance(KEY, T0) == T0
    later = T0 + timedelta(microseconds=1)
    assert Watermarks(store).advance(KEY, later) == later
    assert Watermarks(store).advance(KEY, T0 - timedelta(days=30)) == later
    assert Watermarks(store).advance(KEY, later) == later
    assert Watermarks(store).get(KEY) == later
    assert Watermarks(store).get("pull_requests:o/r") is None  # streams are independent
    assert Watermarks(store).get("comments:o/other") is None  # and so are repositories


def test_stored_as_fixed_width_utc_and_returned_aware(store: SqliteStore) -> None:
    local = datetime(2026, 11, 2, 10, 30, tzinfo=timezone(timedelta(hours=1)))
    in_force = Watermarks(store).advance(KEY, local)
    assert in_force == local
    assert in_force.tzinfo is UTC
    assert names(store) == {KEY: "2026-11-02T09:30:00.000000+00:00"}


def test_naive_datetime_is_refused_and_nothing_is_written(store: SqliteStore) -> None:
    with pytest.raises(ValueError, match="naive"):
        Watermarks(store).advance(KEY, datetime(2026, 11, 2, 9, 0))
    assert names(store) == {}


@pytest.mark.parametrize("name", ["comments", "pull_requests", "comments:o", ":o/r", "c:o/r/x"])
def test_unqualified_or_malformed_names_are_refused(store: SqliteStore, name: str) -> None:
    with pytest.raises(ValueError, match="<stream>:<owner>/<name>"):
        Watermarks(store).advance(name, T0)
    with pytest.raises(ValueError, match="<stream>:<owner>/<name>"):
        Watermarks(store).get(name)


def test_rows_in_another_iso_form_compare_as_instants(store: SqliteStore) -> None:
    # 10:00+01:00 is 09:00Z. As strings it sorts after 09:30Z; as a time it is before.
    put_raw(store, KEY, "2026-11-02T10:00:00+01:00")
    assert Watermarks(store).get(KEY) == T0
    assert Watermarks(store).advance(KEY, T0 + timedelta(minutes=30)) == T0 + timedelta(minutes=30)
    put_raw(store, KEY, "2026-11-02T09:45:00Z")
    assert Watermarks(store).advance(KEY, T0) == T0 + timedelta(minutes=45)


def test_a_watermark_survives_a_restart(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        Watermarks(store).advance(KEY, T0)
    with SqliteStore(tmp_path / "s.db") as store:
        assert Watermarks(store).get(KEY) == T0
        assert Watermarks(store).advance(KEY, T0 - timedelta(hours=1)) == T0


# -- adoption of unqualified rows -----------------------------------------------------------


def test_legacy_rows_are_adopted_once_and_deleted(store: SqliteStore) -> None:
    put_raw(store, "pull_requests", to_db_time(T0))
    put_raw(store, "comments", "2026-11-02T09:05:00Z")

    assert Watermarks(store).adopt_legacy("o/r") is True
    assert names(store) == {
        "pull_requests:o/r": to_db_time(T0),
        "comments:o/r": to_db_time(T0 + timedelta(minutes=5)),
    }
    assert Watermarks(store).adopt_legacy("o/r") is False

    # A second repository later pointed at the same store inherits nothing.
    assert Watermarks(store).adopt_legacy("o/second") is False
    assert Watermarks(store).get("pull_requests:o/second") is None
    assert Watermarks(store).get("comments:o/second") is None


def test_adoption_keeps_the_later_of_legacy_and_qualified(store: SqliteStore) -> None:
    put_raw(store, "pull_requests", to_db_time(T0))
    put_raw(store, "comments", to_db_time(T0))
    Watermarks(store).advance("pull_requests:o/r", T0 + timedelta(hours=1))  # later: kept
    Watermarks(store).advance("comments:o/r", T0 - timedelta(hours=1))  # earlier: replaced

    assert Watermarks(store).adopt_legacy("o/r") is True
    assert Watermarks(store).get("pull_requests:o/r") == T0 + timedelta(hours=1)
    assert Watermarks(store).get("comments:o/r") == T0
    assert set(names(store)) == {"pull_requests:o/r", "comments:o/r"}


def test_adoption_of_one_stream_only(store: SqliteStore) -> None:
    put_raw(store, "comments", to_db_time(T0))
    assert Watermarks(store).adopt_legacy("o/r") is True
    assert names(store) == {"comments:o/r": to_db_time(T0)}


def test_nothing_to_adopt_on_a_fresh_store(store: SqliteStore) -> None:
    assert Watermarks(store).adopt_legacy("o/r") is False
    assert names(store) == {}


def test_adoption_validates_the_repository(store: SqliteStore) -> None:
    put_raw(store, "comments", to_db_time(T0))
    with pytest.raises(ValueError, match="owner/name"):
        Watermarks(store).adopt_legacy("not-a-repo")
    assert names(store) == {"comments": to_db_time(T0)}


def test_adoption_is_all_or_nothing(store: SqliteStore) -> None:
    put_raw(store, "pull_requests", to_db_time(T0))
    put_raw(store, "comments", "garbage")  # unreadable: the whole adoption must roll back
    with pytest.raises(ValueError):
        Watermarks(store).adopt_legacy("o/r")
    assert names(store) == {"pull_requests": to_db_time(T0), "comments": "garbage"}


# -- concurrent writers ---------------------------------------------------------------------


def offered_times(seed: int, n: int, ceiling: int) -> list[int]:
    """Shuffled offsets in seconds, ending low so a last-writer-wins store would go back."""
    rng = random.Random(seed)
    values = [rng.randrange(ceiling) for _ in range(n - 1)]
    return [*values, 0]


def advance_many(store: Database, offsets: list[int]) -> list[str]:
    """Advance KEY through ``offsets``; return what was in force after each, checking order."""
    seen: list[str] = []
    previous = None
    for offset in offsets:
        offered = T0 + timedelta(seconds=offset)
        in_force = Watermarks(store).advance(KEY, offered)
        assert in_force >= offered
        if previous is not None:
            assert in_force >= previous, (in_force, previous)
        now_stored = Watermarks(store).get(KEY)
        assert now_stored is not None
        assert now_stored >= in_force
        previous = now_stored
        seen.append(to_db_time(in_force))
    return seen


def watch(path: Path, stop: threading.Event, backwards: list[tuple[str, str]]) -> None:
    """Poll the stored value through a plain connection and record any step backwards."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        last = ""
        while not stop.is_set():
            row = conn.execute("SELECT at FROM watermarks WHERE name = ?", (KEY,)).fetchone()
            if row is not None:
                if row[0] < last:
                    backwards.append((last, row[0]))
                last = max(last, row[0])
    finally:
        conn.close()


def test_threads_never_move_a_watermark_backwards(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    shared = SqliteStore(path)
    own = [SqliteStore(path) for _ in range(3)]
    plans = [offered_times(seed, 60, 10_000) for seed in range(8)]
    stores = [shared] * 5 + own  # five threads on one store, three with their own
    errors: list[BaseException] = []
    backwards: list[tuple[str, str]] = []
    stop = threading.Event()
    start = threading.Barrier(len(plans))

    def run(store: SqliteStore, offsets: list[int]) -> None:
        try:
            start.wait()
            advance_many(store, offsets)
        except BaseException as exc:
            errors.append(exc)

    watcher = threading.Thread(target=watch, args=(path, stop, backwards))
    watcher.start()
    writers = [
        threading.Thread(target=run, args=(s, p)) for s, p in zip(stores, plans, strict=True)
    ]
    try:
        for t in writers:
            t.start()
        for t in writers:
            t.join()
    finally:
        stop.set()
        watcher.join()
    try:
        assert errors == []
        assert backwards == []
        top = T0 + timedelta(seconds=max(max(p) for p in plans))
        assert Watermarks(shared).get(KEY) == top
    finally:
        for s in (shared, *own):
            s.close()


def _process_writer(path: str, offsets: list[int]) -> list[str]:
    """Run in a spawned process: its own store on the shared file."""
    with SqliteStore(path) as store:
        return advance_many(store, offsets)


def test_processes_never_move_a_watermark_backwards(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SqliteStore(path).close()  # migrated before the writers race
    plans = [offered_times(100 + seed, 40, 10_000) for seed in range(4)]
    backwards: list[tuple[str, str]] = []
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(path, stop, backwards))
    watcher.start()
    try:
        with ProcessPoolExecutor(
            max_workers=len(plans), mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            results = list(pool.map(_process_writer, [str(path)] * len(plans), plans))
    finally:
        stop.set()
        watcher.join()

    assert backwards == []
    for plan, seen in zip(plans, results, strict=True):
        assert len(seen) == len(plan)
        assert seen == sorted(seen)
    top = T0 + timedelta(seconds=max(max(p) for p in plans))
    with SqliteStore(path) as store:
        assert Watermarks(store).get(KEY) == top
    assert max(from_db_time(s) for seen in results for s in seen) == top


def _host_writer(conninfo: str, offsets: list[int]) -> list[str]:
    """Run in a spawned process: a "host" of its own, with its own pool on the database."""
    with PostgresStore(conninfo) as store:
        return advance_many(store, offsets)


def test_hosts_on_postgresql_never_move_a_watermark_backwards() -> None:
    with throwaway_database() as conninfo:
        PostgresStore(conninfo).close()  # migrated before the writers race
        plans = [offered_times(200 + seed, 40, 10_000) for seed in range(4)]
        backwards: list[tuple[str, str]] = []
        stop = threading.Event()

        def watch_server() -> None:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                last = ""
                while not stop.is_set():
                    row = conn.execute("SELECT at FROM watermarks WHERE name = %s",
                                       (KEY,)).fetchone()
                    if row is not None:
                        if row[0] < last:
                            backwards.append((last, row[0]))
                        last = max(last, row[0])

        watcher = threading.Thread(target=watch_server)
        watcher.start()
        try:
            with ProcessPoolExecutor(
                max_workers=len(plans), mp_context=multiprocessing.get_context("spawn")
            ) as pool:
                results = list(pool.map(_host_writer, [conninfo] * len(plans), plans))
        finally:
            stop.set()
            watcher.join()
        with PostgresStore(conninfo) as store:
            stored = Watermarks(store).get(KEY)
    assert backwards == []
    for plan, seen in zip(plans, results, strict=True):
        assert len(seen) == len(plan) and seen == sorted(seen)
    assert stored == T0 + timedelta(seconds=max(max(p) for p in plans))


def test_the_apps_own_streams_are_named_without_a_repository(store: SqliteStore) -> None:
    marks = Watermarks(store)
    assert search_key(31) == "search:31"
    for name in ("hook_deliveries", search_key(31)):
        assert marks.advance(name, T0) == T0
        assert marks.get(name) == T0
    with pytest.raises(ValueError):
        marks.get("search:acme")
