"""The PostgreSQL store itself: what ``PostgresStore`` adds to the ``Database`` contract
(the table modules' own tests run on it through the ``database`` fixture)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from service.config.connections import StoreConfig
from service.observe.health import Health
from service.storage.errors import NestedTransactionError, is_contention
from service.storage.open import open_store, store_label
from service.storage.pg_leadership import leader_lock_key
from service.storage.postgres import (
    PG_HEAD_VERSION,
    START_WAIT,
    WRITE_LOCK,
    PostgresStore,
    translate_placeholders,
)
from service.storage.queue import Claim
from tests.databases import as_url, private_cluster
from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0, mention, opened


def test_placeholders_are_rewritten_outside_quotes_and_casts() -> None:
    assert translate_placeholders("SELECT a FROM t WHERE b = ? AND c = :name") == (
        "SELECT a FROM t WHERE b = %s AND c = %(name)s")
    quoted = "SELECT '?', ':x', '{}', x::text, '50%' FROM t WHERE y LIKE 'a%'"
    assert translate_placeholders(quoted) == quoted.replace("%", "%%")
    assert translate_placeholders("SELECT 5 % 3") == "SELECT 5 %% 3"


def test_a_new_database_is_migrated_once(conninfo: str) -> None:
    with PostgresStore(conninfo) as first:
        assert first.version == first.head_version == PG_HEAD_VERSION
    with PostgresStore(conninfo) as again, again.read() as tx:
        assert again.version == PG_HEAD_VERSION
        assert tx.execute("SELECT COUNT(*) FROM schema_version").fetchone()[0] == 1


def test_try_begin_never_begins_on_a_server(pg: PostgresStore) -> None:
    """Each statement would be a round trip the event loop waits for: the webhook route
    writes on a worker thread here, and ``try_begin`` says so by beginning nothing."""
    assert pg.try_begin() is None


def test_no_two_writers_at_once(pg: PostgresStore) -> None:
    holding, release = threading.Event(), threading.Event()

    def writer() -> None:
        with pg.transaction() as tx:
            tx.execute("INSERT INTO budget_state (key, value) VALUES ('k', 'v')")
            holding.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(10)
        with pytest.raises(psycopg.Error) as waited:  # past lock_timeout: contention
            with pg.transaction():
                pass
        assert is_contention(waited.value)
    finally:
        release.set()
        thread.join()
    with pg.transaction() as tx:
        tx.execute("UPDATE budget_state SET value = 'w' WHERE key = 'k'")
    with pg.read() as tx:
        assert tx.execute("SELECT value FROM budget_state").fetchall() == [("w",)]


def test_the_write_lock_is_the_documented_one(pg: PostgresStore, conninfo: str) -> None:
    with pg.transaction(), psycopg.connect(conninfo, autocommit=True) as other:
        (taken,) = other.execute("SELECT pg_try_advisory_xact_lock(%s)",
                                 (WRITE_LOCK,)).fetchone() or (True,)
        assert taken is False


def test_a_failed_block_rolls_back_and_nesting_is_refused(pg: PostgresStore) -> None:
    def fail() -> None:
        with pg.transaction() as tx:
            tx.execute("INSERT INTO budget_state (key, value) VALUES ('k', 'v')")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fail()
    with pg.read() as tx:
        assert tx.execute("SELECT COUNT(*) FROM budget_state").fetchone()[0] == 0
    with pg.transaction(), pytest.raises(NestedTransactionError):
        with pg.transaction():
            pass
    with pg.read(), pytest.raises(NestedTransactionError):
        with pg.transaction():
            pass


def test_a_literal_percent_survives_the_rewrite(pg: PostgresStore) -> None:
    with pg.read() as tx:
        assert tx.execute("SELECT 5 % 3").fetchone() == (2,)
        assert tx.execute("SELECT 'a%b' || ?", ("c",)).fetchone() == ("a%bc",)


def test_a_read_inside_a_transaction_sees_its_writes(pg: PostgresStore) -> None:
    with pg.transaction() as tx:
        tx.execute("INSERT INTO budget_state (key, value) VALUES ('k', 'v')")
        with pg.read() as same:
            assert same.execute("SELECT value FROM budget_state").fetchone() == ("v",)


def test_the_health_check_reads_the_backends_own_version(pg: PostgresStore) -> None:
    check = Health(pg).report(datetime.now(UTC))["checks"]["store"]  # type: ignore[index]
    assert check["status"] == "ok" and check["schema_version"] == PG_HEAD_VERSION


def test_the_config_chooses_the_backend(conninfo: str, tmp_path: Path) -> None:
    url, _ = as_url(conninfo)
    config = StoreConfig(path=str(tmp_path / "state.db"), url=url)
    store = open_store(config)
    try:
        assert isinstance(store, PostgresStore) and store_label(config) == url
    finally:
        store.close()
    sqlite = open_store(StoreConfig(path=str(tmp_path / "state.db")))
    try:
        assert not isinstance(sqlite, PostgresStore)
        assert store_label(StoreConfig(path="x.db")) == "x.db"
    finally:
        sqlite.close()


def test_every_process_on_one_file_leads(tmp_path: Path) -> None:
    from service.storage.sqlite import SqliteStore

    with SqliteStore(tmp_path / "state.db") as store:
        assert store.leadership("poller").lead() and store.leadership("poller").lead()


def test_a_connection_the_server_dropped_is_replaced_before_it_is_lent(
        pg: PostgresStore, conninfo: str) -> None:
    with pg.read() as tx:
        (mine,) = tx.execute("SELECT pg_backend_pid()").fetchone()
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (mine,))
        for _ in range(200):  # the backend ends asynchronously
            if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                 (mine,)).fetchone():
                break
            time.sleep(0.05)
    with pg.transaction() as tx:  # not an error: the pool lends a live connection
        tx.execute("INSERT INTO budget_state (key, value) VALUES ('k', 'v')")
    assert pg.version == PG_HEAD_VERSION


def test_a_live_connection_is_lent_without_a_round_trip_and_a_dropped_one_is_checked(
        conninfo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from psycopg_pool import ConnectionPool

    full_checks: list[int] = []
    real = ConnectionPool.check_connection
    monkeypatch.setattr(ConnectionPool, "check_connection",
                        staticmethod(lambda conn: (full_checks.append(1), real(conn))[1]))
    with PostgresStore(conninfo, max_connections=1) as store:
        for _ in range(3):
            with store.read() as tx:
                (mine,) = tx.execute("SELECT pg_backend_pid()").fetchone()
        assert full_checks == []  # a live connection: lent with no query sent first
        with psycopg.connect(conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (mine,))
            for _ in range(200):  # gone once it has said so on its socket and exited
                if not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                     (mine,)).fetchone():
                    break
                time.sleep(0.05)
        with store.transaction() as tx:  # the dead one was checked and replaced
            tx.execute("INSERT INTO budget_state (key, value) VALUES ('k', 'v')")
        assert full_checks


def test_an_unreachable_server_is_told_from_a_fault() -> None:
    from psycopg_pool import PoolTimeout

    from service.storage.errors import is_unavailable

    assert is_unavailable(psycopg.OperationalError("server closed the connection"))
    assert is_unavailable(PoolTimeout("no connection in 30 s"))
    wrapped = RuntimeError("claim failed")
    wrapped.__cause__ = psycopg.OperationalError("connection refused")
    assert is_unavailable(wrapped)
    assert not is_unavailable(psycopg.errors.UniqueViolation("duplicate key"))
    assert not is_unavailable(psycopg.ProgrammingError("syntax error"))
    assert not is_unavailable(RuntimeError("a bug"))


# -- claims on several hosts at once ---------------------------------------------------------


class HeldClaim:
    """A claim on host A stopped inside its ``admit`` (its candidate's row and pull request
    locked, the transaction open) until ``release`` — what host B's claim meets."""

    def __init__(self, queue: QueueDriver) -> None:
        self.inside, self.go = threading.Event(), threading.Event()
        self.result: list[Claim | None] = []

        def admit(_tx: object, _claim: Claim, _now: datetime) -> bool:
            self.inside.set()
            assert self.go.wait(30)
            return True

        self.thread = threading.Thread(target=lambda: self.result.append(
            queue.claim(now=T0, owner="host-a", admit=admit)))
        self.thread.start()
        assert self.inside.wait(30)

    def release(self) -> Claim | None:
        self.go.set()
        self.thread.join(30)
        return self.result[0]


def test_a_claim_passes_over_the_row_another_host_is_claiming(conninfo: str) -> None:
    with PostgresStore(conninfo) as host_a, PostgresStore(conninfo) as host_b:
        QueueDriver(host_a).enqueue_many([(opened(1), T0),
                                          (opened(2), T0 + timedelta(seconds=1))])
        held = HeldClaim(QueueDriver(host_a))
        # Host A holds the oldest row; host B takes the next one at once (no wait for A).
        taken = QueueDriver(host_b).claim(now=T0, owner="host-b")
        assert taken is not None and taken.job.pr_number == 2
        first = held.release()
        assert first is not None and first.job.pr_number == 1


def test_two_hosts_never_lease_one_pull_request(conninfo: str) -> None:
    with PostgresStore(conninfo) as host_a, PostgresStore(conninfo) as host_b:
        QueueDriver(host_a).enqueue_many(
            [(opened(1), T0), (mention(1, 77), T0 + timedelta(seconds=1))])
        held = HeldClaim(QueueDriver(host_a))
        # The mention is free, but its pull request is being leased on host A right now.
        assert QueueDriver(host_b).claim(now=T0, owner="host-b") is None
        assert held.release() is not None
        # And once A's lease is committed it is live: still nothing for B.
        assert QueueDriver(host_b).claim(now=T0, owner="host-b") is None
        with host_b.read() as tx:
            leased = tx.execute("SELECT owner FROM queue WHERE status = 'claimed'").fetchall()
        assert leased == [("host-a",)]


def test_an_ordinary_writer_waits_for_a_concurrent_one(conninfo: str) -> None:
    with PostgresStore(conninfo) as host_a, PostgresStore(conninfo, lock_timeout=0.3) as host_b:
        QueueDriver(host_a).enqueue(opened(1), now=T0)
        held = HeldClaim(QueueDriver(host_a))
        with pytest.raises(psycopg.Error) as waited, host_b.transaction():
            pass  # exclusive: it cannot begin while the claim holds the lock shared
        assert is_contention(waited.value)
        assert held.release() is not None


def test_named_locks_are_held_until_the_transaction_ends(conninfo: str) -> None:
    with PostgresStore(conninfo) as host_a, PostgresStore(conninfo) as host_b:
        with host_a.transaction(concurrent=True) as tx:
            host_a.lock(tx, "budget")
            with host_b.transaction(concurrent=True) as other:
                assert host_b.try_lock(other, "budget") is False
                assert host_b.try_lock(other, "pull:o/r#1") is True
        with host_b.transaction(concurrent=True) as other:
            assert host_b.try_lock(other, "budget") is True


def test_a_start_waits_for_a_server_that_is_not_up_yet_but_not_for_a_wrong_password() -> None:
    with private_cluster(password="right") as cluster:
        good = make_conninfo(cluster.conninfo, password="right")
        began = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            PostgresStore(make_conninfo(cluster.conninfo, password="wrong"))
        assert time.monotonic() - began < START_WAIT  # refused at once: nothing to wait for
        cluster.stop()
        opened: list[PostgresStore | BaseException] = []

        def start() -> None:
            try:
                opened.append(PostgresStore(good))
            except BaseException as exc:  # pragma: no cover - the failure reported below
                opened.append(exc)

        starting = threading.Thread(target=start)
        starting.start()  # the server is down: the store waits for it
        cluster.start()
        starting.join(START_WAIT + 30)
        [store] = opened
        assert isinstance(store, PostgresStore), store
        with store:
            assert store.version == PG_HEAD_VERSION


def test_scaling_md_names_the_pollers_lock_by_its_real_key() -> None:
    import re
    text = (Path(__file__).resolve().parents[2] / "docs" / "SCALING.md").read_text()
    found = re.search(r"l\.classid = (\d+) AND l\.objid = (\d+)", text)
    assert found is not None
    key = leader_lock_key("poller")
    assert (int(found[1]), int(found[2])) == (key >> 32, key & 0xFFFFFFFF)
