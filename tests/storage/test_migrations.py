"""The store's schema and its migrations: snapshot, upgrades from every version, failures.

Regenerate the checked-in snapshot after an intended schema change with
``python -m tests.storage.test_migrations`` (and say why in the migration that caused it).
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service.storage.errors import MigrationError, is_contention
from service.storage.etags import StoredETags
from service.storage.migrate import migrate
from service.storage.migrations import MIGRATIONS
from service.storage.sqlite import HEAD_VERSION, SqliteStore
from service.storage.times import to_db_time
from service.storage.watermarks import Watermarks

SNAPSHOT = Path(__file__).with_name("schema_snapshot.sql")
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def at(minutes: int) -> str:
    return to_db_time(T0 + timedelta(minutes=minutes))


def dump_schema(conn: sqlite3.Connection) -> str:
    """sqlite_master's SQL, whitespace-normalised, ordered by type then name."""
    rows = conn.execute(
        "SELECT type, name, sql FROM sqlite_master"
        " WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ).fetchall()
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    lines = [f"-- user_version {version}"]
    lines += [" ".join(sql.split()) + ";" for _, _, sql in rows]
    return "\n".join(lines) + "\n"


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def raw_schema(path: Path) -> str:
    conn = raw(path)
    try:
        return dump_schema(conn)
    finally:
        conn.close()


def build(path: Path, migrations: Sequence[tuple[str, ...]]) -> None:
    SqliteStore(path, migrations=migrations).close()


# -- rows for every table, at every version ------------------------------------------------
#
# One row set covering every column at the head. A file at version k gets the columns that
# exist at k; after the upgrade those must read back unchanged and the rest must hold the
# value their migration gives an existing row.

ROWS: dict[str, list[dict[str, object]]] = {
    "etags": [
        {"path": "GET /repos/o/r/pulls", "etag": 'W/"a1"', "last_modified": "Mon, 02 Nov"},
        {"path": "GET /repos/o/r/issues/comments", "etag": '"b2"', "last_modified": None},
    ],
    "watermarks": [
        {"name": "pull_requests:o/r", "at": at(0)},
        {"name": "comments:o/r", "at": at(5)},
    ],
    "queue": [
        {
            "dedupe_key": "pr_opened:o/r:1:" + "a" * 40,
            "kind": "pr_opened",
            "repo": "o/r",
            "pr_number": 1,
            "head_sha": "a" * 40,
            "actor_id": 7,
            "status": "done",
            "attempts": 1,
            "enqueued_at": at(1),
            "leased_until": at(21),
            "owner": "host:1:w0",
            "comment_id": None,
            "comment_source": None,
            "command": "review",
        },
        {
            "dedupe_key": "mention:o/r:2:99",
            "kind": "mention",
            "repo": "o/r",
            "pr_number": 2,
            "head_sha": None,
            "actor_id": 9,
            "status": "pending",
            "attempts": 0,
            "enqueued_at": at(2),
            "leased_until": None,
            "owner": None,
            "comment_id": 99,
            "comment_source": "issue",
            "command": "describe",
        },
    ],
    "ledger": [
        {
            "id": 1,
            "dedupe_key": "pr_opened:o/r:1:" + "a" * 40,
            "owner": "host:1:w0",
            "actor_id": 7,
            "mode": "full",
            "reserved_tokens": 60000,
            "used_tokens": 41234,
            "usage_confidence": "exact",
            "engine": "claude_code",
            "model": "m",
            "reserved_at": at(3),
            "settled_at": at(9),
            "reviewed_lines": 420,
            "stop_reason": "completed",
            "repo": "o/r",
            "installation_id": 42,
            "pr_number": 1,
            "reviewed_since": "b" * 40,
            "cost_usd": 0.4125,
            "estimated_tokens": 39000,
        },
        {
            "id": 2,
            "dedupe_key": "mention:o/r:2:99",
            "owner": "host:1:w1",
            "actor_id": 9,
            "mode": "mention_only",
            "reserved_tokens": 60000,
            "used_tokens": None,
            "usage_confidence": None,
            "engine": None,
            "model": None,
            "reserved_at": at(4),
            "settled_at": None,
            "reviewed_lines": None,
            "stop_reason": None,
            "repo": "o/r",
            "installation_id": 42,
            "pr_number": 2,
            "reviewed_since": None,
            "cost_usd": None,
            "estimated_tokens": None,
        },
    ],
    "runs": [
        {
            "dedupe_key": "pr_opened:o/r:1:" + "a" * 40,
            "repo": "o/r",
            "pr_number": 1,
            "head_sha": "a" * 40,
            "outcome": "completed",
            "findings": '[{"path": "a.py", "line": 3}]',
            "comment_id": 555,
            "recorded_at": at(9),
            "published_at": at(10),
            "content_purged_at": None,
            "publish_outcome": "published",
            "publish_attempts": 1,
            "publish_failed_at": None,
            "omitted": '["x.lock"]',
            "assessment": '{"verdict": "ok"}',
            "description": None,
            "publish_lease_until": None,
            "fixed": '[{"fingerprint": "f1", "thread_id": "PRRT_1"}]',
            "coverage": '{"files": 3, "reviewed": 2, "parts": 1, "pruned": []}',
            "answer": None,
        },
    ],
    "budget_state": [
        {"key": "calibrated_pct", "value": "93"},
        {"key": "tripped_until", "value": at(60)},
    ],
    "budget_policy": [
        {"id": 1, "authority_repo": "o/r", "policy": '{"weekly_tokens": 1}', "written_at": at(0)},
    ],
    "agent_comments": [
        {"repo": "o/r", "comment_id": 555, "posted_at": at(10)},
        {"repo": "o/s", "comment_id": 556, "posted_at": at(11)},
    ],
    "deliveries": [
        {
            "delivery_id": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
            "event": "pull_request",
            "action": "opened",
            "installation_id": 42,
            "received_at": at(1),
            "outcome": "enqueued",
        },
    ],
    "closed_pull_requests": [
        {"repo": "o/r", "pr_number": 3, "merged": 1, "closed_at": at(5), "purged_at": None},
    ],
    "repositories": [
        {"repo": "o/r", "installation_id": 42, "added_at": at(0), "removed_at": None},
    ],
    "notices": [
        {"dedupe_key": "mention:o/r:2:99", "kind": "budget:exhausted", "comment_id": 777,
         "posted_at": at(6)},
    ],
}

# What a row written before a column existed reads back as, when not NULL.
ADDED_DEFAULTS: dict[tuple[str, str], object] = {
    ("runs", "publish_attempts"): 0,
    ("runs", "omitted"): "[]",
    ("queue", "command"): "review",
}

ORDER_BY = {"ledger": "id", "budget_policy": "id"}


def added_default(table: str, column: str, present: dict[str, list[str]]) -> object:
    """What a column added after the row was written reads back as."""
    if (table, column) == ("ledger", "installation_id"):
        # Migration 29 charges earlier rows to their repository's installation, when the
        # store knew it (the repositories table came with migration 21).
        return 42 if "repositories" in present else None
    return ADDED_DEFAULTS.get((table, column))

# Tables whose rows are derived from others (kept by triggers), checked by derivation.
DERIVED = {"ledger_hours", "ledger_cost_hours"}


def assert_ledger_hours_derived(conn: sqlite3.Connection) -> None:
    hours = dict(conn.execute("SELECT hour, charged FROM ledger_hours WHERE charged != 0"))
    expected = dict(conn.execute(
        "SELECT substr(reserved_at, 1, 13), SUM(COALESCE(used_tokens, reserved_tokens))"
        " FROM ledger GROUP BY 1"))
    assert hours == {h: c for h, c in expected.items() if c != 0}


def assert_ledger_cost_hours_derived(conn: sqlite3.Connection) -> None:
    hours = {h: (m, t, r) for h, m, t, r in conn.execute(
        "SELECT hour, micro_usd, tokens, runs FROM ledger_cost_hours WHERE runs != 0")}
    expected = {h: (m, t, r) for h, m, t, r in conn.execute(
        "SELECT substr(reserved_at, 1, 13), SUM(CAST(round(cost_usd * 1000000) AS INTEGER)),"
        " SUM(COALESCE(used_tokens, reserved_tokens)), COUNT(*)"
        " FROM ledger WHERE cost_usd IS NOT NULL GROUP BY 1")}
    assert hours == expected


def tables(conn: sqlite3.Connection) -> list[str]:
    return [
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]


def columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def fill(path: Path) -> dict[str, list[str]]:
    """Insert ROWS into every table the file has; return the columns each table had."""
    conn = raw(path)
    try:
        present = {t: columns(conn, t) for t in tables(conn)}
        conn.execute("BEGIN")
        for table, cols in present.items():
            for row in ROWS.get(table, []):
                names = ", ".join(cols)
                marks = ", ".join("?" for _ in cols)
                conn.execute(
                    f"INSERT INTO {table} ({names}) VALUES ({marks})", [row[c] for c in cols]
                )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return present


def read_table(conn: sqlite3.Connection, table: str) -> list[dict[str, object]]:
    cur = conn.execute(f"SELECT * FROM {table} ORDER BY {ORDER_BY.get(table, 'rowid')}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, values, strict=True)) for values in cur]


def test_fresh_store_matches_the_checked_in_snapshot(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        assert store.version == HEAD_VERSION == len(MIGRATIONS) == 38
        with store.read() as conn:
            schema = dump_schema(conn)
    assert schema == SNAPSHOT.read_text(), (
        "schema drifted from tests/schema_snapshot.sql; if intended, regenerate it with "
        "`python -m tests.storage.test_migrations`"
    )


def test_every_migration_is_a_tuple_of_single_statements() -> None:
    for number, migration in enumerate(MIGRATIONS, start=1):
        assert isinstance(migration, tuple), number
        assert migration, number
        for statement in migration:
            assert sqlite3.complete_statement(statement + ";"), (number, statement)
            # A trigger's body is the one place a single statement holds semicolons.
            if not statement.startswith("CREATE TRIGGER"):
                assert ";" not in statement, (number, statement)


def test_reopening_a_head_store_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    build(path, MIGRATIONS)
    fill(path)
    before = raw_schema(path)
    with SqliteStore(path) as store:
        assert store.version == HEAD_VERSION
    assert raw_schema(path) == before


@pytest.mark.parametrize("k", range(HEAD_VERSION))
def test_upgrade_from_every_version_keeps_every_row(tmp_path: Path, k: int) -> None:
    path = tmp_path / f"v{k}.db"
    build(path, MIGRATIONS[:k])
    present = fill(path)

    with SqliteStore(path) as store:
        assert store.version == HEAD_VERSION
        with store.read() as conn:
            assert dump_schema(conn) == SNAPSHOT.read_text()
            assert_ledger_hours_derived(conn)
            assert_ledger_cost_hours_derived(conn)
            for table, cols in present.items():
                if table in DERIVED:
                    continue
                expected = [
                    {
                        c: row[c] if c in cols else added_default(table, c, present)
                        for c in columns(conn, table)
                    }
                    for row in ROWS.get(table, [])
                ]
                assert read_table(conn, table) == expected, table
            for table in set(tables(conn)) - set(present) - DERIVED:
                assert read_table(conn, table) == [], table


def test_pre_list_database_at_version_0_adopts_version_1(tmp_path: Path) -> None:
    # What the code wrote before the migration list existed: version 1's two tables,
    # in its own layout of the same columns, rows in them, user_version never set.
    path = tmp_path / "old.db"
    conn = raw(path)
    conn.execute("CREATE TABLE etags (\n    path TEXT PRIMARY KEY,\n    etag TEXT NOT NULL\n)")
    conn.execute(
        "CREATE TABLE watermarks (\n    name TEXT PRIMARY KEY,  -- stream\n"
        "    at   TEXT NOT NULL\n)"
    )
    conn.execute("INSERT INTO etags VALUES ('GET /repos/o/r/pulls', 'W/\"e\"')")
    conn.execute("INSERT INTO watermarks VALUES ('pull_requests', ?)", (at(0),))
    conn.execute("INSERT INTO watermarks VALUES ('comments', ?)", (at(5),))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()

    with SqliteStore(path) as store:
        assert store.version == HEAD_VERSION
        assert StoredETags(store).get_validators("GET /repos/o/r/pulls") is not None
        with store.read() as conn:
            assert sorted(conn.execute("SELECT name, at FROM watermarks")) == [
                ("comments", at(5)),
                ("pull_requests", at(0)),
            ]
        assert Watermarks(store).adopt_legacy("o/r") is True
        assert Watermarks(store).get("comments:o/r") == T0 + timedelta(minutes=5)

    fresh = tmp_path / "fresh.db"
    build(fresh, MIGRATIONS)
    old, new = raw(path), raw(fresh)
    try:
        for table in tables(new):
            assert list(old.execute(f"PRAGMA table_info({table})")) == list(
                new.execute(f"PRAGMA table_info({table})")
            ), table
    finally:
        old.close()
        new.close()


def test_a_migration_failing_halfway_changes_nothing_and_applies_next_start(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    build(path, MIGRATIONS[:10])
    fill(path)
    before = raw_schema(path)
    # Migration 11's two ALTERs and its index succeed, then the injected statement fails.
    broken = list(MIGRATIONS)
    broken[10] = (*MIGRATIONS[10], "INSERT INTO no_such_table VALUES (1)")

    with pytest.raises(MigrationError, match="migration 11 failed") as info:
        SqliteStore(path, migrations=broken)
    assert not is_contention(info.value)
    assert raw_schema(path) == before  # version 10, no ledger.repo, no index

    with SqliteStore(path) as store:
        assert store.version == HEAD_VERSION
        with store.read() as conn:
            assert dump_schema(conn) == SNAPSHOT.read_text()
            assert len(read_table(conn, "ledger")) == 2


def test_a_failing_app_migration_applies_cleanly_once_fixed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    build(path, MIGRATIONS)
    extra = ("CREATE TABLE IF NOT EXISTS extra (x INTEGER)", "INSERT INTO extra VALUES (1)")
    with pytest.raises(MigrationError, match=f"migration {HEAD_VERSION + 1} failed"):
        SqliteStore(path, migrations=(*MIGRATIONS, (*extra, "INSERT INTO extra VALUES (")))
    assert raw_schema(path) == SNAPSHOT.read_text()

    with SqliteStore(path, migrations=(*MIGRATIONS, extra)) as store:
        assert store.version == HEAD_VERSION + 1
        with store.read() as conn:
            assert conn.execute("SELECT x FROM extra").fetchall() == [(1,)]


def test_a_store_newer_than_the_code_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    build(path, MIGRATIONS)
    conn = raw(path)
    conn.execute(f"PRAGMA user_version = {HEAD_VERSION + 1}")
    conn.close()
    with pytest.raises(MigrationError, match="newer than this code"):
        SqliteStore(path)
    assert raw_schema(path).startswith(f"-- user_version {HEAD_VERSION + 1}\n")


def test_migrate_refuses_a_connection_inside_a_transaction(tmp_path: Path) -> None:
    conn = raw(tmp_path / "s.db")
    try:
        conn.execute("BEGIN")
        with pytest.raises(MigrationError, match="no open transaction"):
            migrate(conn, MIGRATIONS)
    finally:
        conn.close()


def test_concurrent_first_opens_migrate_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    build(path, ())  # an empty file, already in WAL mode
    errors: list[BaseException] = []
    versions: list[int] = []
    start = threading.Barrier(6)

    def open_it() -> None:
        try:
            start.wait()
            with SqliteStore(path) as store:
                versions.append(store.version)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert versions == [HEAD_VERSION] * 6
    assert raw_schema(path) == SNAPSHOT.read_text()


# -- migration 15 ----------------------------------------------------------------------------

WINDOW_SUM = (
    "SELECT COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) FROM ledger"
    " WHERE reserved_at > ?"
)


def ledger_row(
    row_id: int,
    key: str,
    minutes: int,
    *,
    reserved: int = 60000,
    used: int | None = None,
    settled: int | None = None,
) -> tuple[object, ...]:
    return (
        row_id,
        key,
        "host:1:w0",
        7,
        "full",
        reserved,
        used,
        None if used is None else "exact",
        None,
        None,
        at(minutes),
        None if settled is None else at(settled),
        None,
        None,
        "o/r",
        1,
    )


def test_migration_15_settles_duplicate_open_rows_and_keeps_the_charge(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    build(path, MIGRATIONS[:14])
    rows = [
        ledger_row(1, "a", 0, reserved=50000),  # a: three open, newest by id is 7
        ledger_row(2, "a", 10, reserved=60000),
        ledger_row(3, "b", 20),  # b: one open row, untouched
        ledger_row(4, "c", 30, used=1200, settled=31),  # c: a settled row and one open
        ledger_row(5, "c", 40),
        ledger_row(6, "d", 50, used=300, settled=51),  # d: settled only
        ledger_row(7, "a", 5, reserved=70000),  # newest by id, though reserved earlier
        ledger_row(8, "e", 60, used=99, settled=None),  # e: an odd open row with usage
        ledger_row(9, "e", 70),
    ]
    conn = raw(path)
    conn.executemany(f"INSERT INTO ledger VALUES ({', '.join('?' * 16)})", rows)
    starts = [at(m) for m in (-1, 0, 4, 7, 15, 35, 55, 65, 80)]
    sums_before = [conn.execute(WINDOW_SUM, (s,)).fetchone()[0] for s in starts]
    before = read_table(conn, "ledger")
    conn.close()

    with SqliteStore(path) as store, store.read() as conn:
        after = read_table(conn, "ledger")
        assert [conn.execute(WINDOW_SUM, (s,)).fetchone()[0] for s in starts] == sums_before

        closed = {1, 2, 8}
        for old, new in zip(before, after, strict=True):
            if new["id"] in closed:
                assert new == {
                    **old,
                    "used_tokens": old["used_tokens"] or old["reserved_tokens"],
                    "usage_confidence": "unavailable",
                    "stop_reason": "lost",
                    "settled_at": old["reserved_at"],
                    "reviewed_since": None,
                    "cost_usd": None,
                    "installation_id": None,
                    "estimated_tokens": None,
                }
            else:
                assert new == {**old, "reviewed_since": None, "cost_usd": None,
                               "installation_id": None, "estimated_tokens": None}
        open_rows = conn.execute(
            "SELECT dedupe_key, id FROM ledger WHERE settled_at IS NULL ORDER BY dedupe_key"
        ).fetchall()
        assert open_rows == [("a", 7), ("b", 3), ("c", 5), ("e", 9)]

    with SqliteStore(path) as store:
        with pytest.raises(sqlite3.IntegrityError), store.transaction() as conn:
            conn.execute(
                "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                " reserved_at) VALUES ('a', 'w', 7, 'full', 1, ?)",
                (at(90),),
            )
        with store.transaction() as conn:  # a settled duplicate is fine
            conn.execute(
                "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                " reserved_at, settled_at, used_tokens) VALUES ('a', 'w', 7, 'full', 1, ?, ?, 1)",
                (at(90), at(91)),
            )


def _write_snapshot() -> None:
    with tempfile.TemporaryDirectory() as tmp, SqliteStore(Path(tmp) / "s.db") as store:
        with store.read() as conn:
            SNAPSHOT.write_text(dump_schema(conn))
    sys.stdout.write(f"wrote {SNAPSHOT}\n")


if __name__ == "__main__":
    _write_snapshot()


def test_a_first_start_says_migrated_in_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("INFO", logger="service.storage"):
        SqliteStore(tmp_path / "state.db").close()
        SqliteStore(tmp_path / "state.db").close()  # already at the head: says nothing
    said = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
    assert said == [f"store migrated from schema version 0 to {HEAD_VERSION}"]


def test_a_first_start_on_postgresql_says_migrated_in_one_line(
        caplog: pytest.LogCaptureFixture) -> None:
    from service.storage.postgres import PG_HEAD_VERSION, PostgresStore
    from tests.databases import throwaway_database

    with throwaway_database() as url, caplog.at_level("INFO", logger="service.storage"):
        PostgresStore(url).close()
        PostgresStore(url).close()
    said = [r.getMessage() for r in caplog.records if "migrated" in r.getMessage()]
    assert said == [f"store migrated from schema version 0 to {PG_HEAD_VERSION}"]
