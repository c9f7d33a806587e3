"""Budgets across installations: ``per_installation_pct`` and ``repository_reviews_per_day``.

One App installed by several organisations must not let one of them spend the whole
allowance: each reservation is charged to its repository's installation, an installation
at its share waits while the others are admitted, and a repository with a cap of its own
waits at it. Every test runs on SQLite and on PostgreSQL; the race uses real threads,
each with its own connection and governor.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.budget.report import render
from service.budget.usage import Usage
from service.budget.windows import measure, measure_actor
from service.storage.database import Database, Transaction
from service.storage.postgres import PostgresStore
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.databases import throwaway_database
from tests.kit.queue import QueueDriver
from tests.kit.stores import BACKENDS
from tests.queue_helpers import LEASE, T0, budget, drain_racing, mention

ACME, GLOBEX = 101, 202


def install(store: Database, repo: str, installation: int) -> None:
    with store.transaction() as conn:
        conn.execute("INSERT INTO repositories (repo, installation_id, added_at)"
                     " VALUES (?, ?, ?)", (repo, installation, to_db_time(T0 - timedelta(days=1))))


def charge(store: Database, tokens: int, at: datetime, *, key: str, repo: str) -> None:
    """A settled run of ``repo``, written the way a reservation is (its installation taken
    from the repositories table)."""
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens, used_tokens,"
            " usage_confidence, reserved_at, settled_at, stop_reason, repo, pr_number,"
            " installation_id) VALUES (?, 'old', 1, 'full', ?, ?, 'exact', ?, ?, 'completed',"
            " ?, 1, (SELECT installation_id FROM repositories WHERE repo = ?))",
            (key, tokens, tokens, to_db_time(at), to_db_time(at), repo, repo))


def installation_of_row(store: Database, key: str) -> int | None:
    with store.read() as conn:
        row = conn.execute("SELECT installation_id FROM ledger WHERE dedupe_key = ?",
                           (key,)).fetchone()
    return None if row[0] is None else int(row[0])


@pytest.fixture
def store(database: Database) -> Database:
    install(database, "acme/app", ACME)
    install(database, "acme/lib", ACME)
    install(database, "globex/site", GLOBEX)
    return database


def test_a_reservation_is_charged_to_its_repositorys_installation(store: Database) -> None:
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, budget())
    queue.enqueue(mention(1, 1, repo="acme/lib"), now=T0)
    queue.enqueue(mention(2, 2, repo="initech/new"), now=T0)  # not known to be installed
    first = queue.claim(now=T0, owner="a", admit=gov.admit)
    second = queue.claim(now=T0, owner="b", admit=gov.admit)
    assert first is not None and second is not None
    assert installation_of_row(store, first.dedupe_key) == ACME
    assert installation_of_row(store, second.dedupe_key) is None


def test_an_installation_at_its_share_waits_while_another_is_admitted(store: Database) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=10_000, per_installation_pct=50)
    at = T0 - timedelta(hours=2)
    charge(store, 25_000, at, key="k1", repo="acme/app")
    charge(store, 20_000, at + timedelta(minutes=1), key="k2", repo="acme/lib")
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    queue.enqueue(mention(1, 1, repo="acme/app", actor=5), now=T0)
    queue.enqueue(mention(2, 2, repo="globex/site", actor=5), now=T0 + timedelta(seconds=1))
    claimed = queue.claim(now=T0, owner="w", admit=gov.admit)
    # ACME's two repositories hold 45 000 of its 50 000: no room for a run of 10 000.
    assert claimed is not None and claimed.job.repo == "globex/site"
    refusal = gov.refusals["mention:acme/app:1:1"]
    assert (refusal.reason, refusal.window, refusal.frees_at) == (
        "per_installation", "session", at + timedelta(hours=5))
    assert queue.get("mention:acme/app:1:1").attempts == 0  # type: ignore[union-attr]
    # When the older charge leaves the session window, ACME's request is admitted.
    later = queue.claim(now=at + timedelta(hours=5), owner="w2", admit=gov.admit)
    assert later is not None and later.job.repo == "acme/app"


def test_without_a_share_one_installation_may_use_the_whole_window(store: Database) -> None:
    config = budget(session_tokens=30_000, max_run_tokens=10_000)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    for n in range(1, 5):
        queue.enqueue(mention(n, n, repo="acme/app"), now=T0)
    taken = 0
    while queue.claim(now=T0, owner=f"w{taken}", admit=gov.admit) is not None:
        taken += 1
    assert taken == 3


def run_once(queue: QueueDriver, gov: Governor, now: datetime) -> Claim | None:
    c = queue.claim(now=now, owner="w", admit=gov.admit)
    if c is not None:
        assert gov.settle(c, Usage(1_000, "exact", "e", None), now=now)
        assert queue.finish(c.dedupe_key, c.lease.owner)
    return c


def test_a_repository_at_its_daily_cap_waits_while_others_go_on(store: Database) -> None:
    config = budget(repository_reviews_per_day=(("acme/app", 2),))
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    for n in (1, 2, 3):
        queue.enqueue(mention(n, n, repo="acme/app"), now=T0)
    queue.enqueue(mention(9, 9, repo="acme/lib"), now=T0 + timedelta(seconds=1))
    first = T0 + timedelta(minutes=1)
    assert run_once(queue, gov, first) is not None
    assert run_once(queue, gov, first + timedelta(hours=1)) is not None
    other = run_once(queue, gov, first + timedelta(hours=2))
    assert other is not None and other.job.repo == "acme/lib"  # the same installation, uncapped
    refusal = gov.refusals["mention:acme/app:3:3"]
    assert (refusal.reason, refusal.frees_at) == ("repository", first + timedelta(hours=24))
    assert run_once(queue, gov, first + timedelta(hours=23, minutes=59)) is None
    assert run_once(queue, gov, first + timedelta(hours=24)) is not None


def test_the_budget_shows_spend_per_installation(store: Database) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=10_000, per_installation_pct=50,
                    repository_reviews_per_day=(("acme/app", 3),))
    charge(store, 4_000, T0 - timedelta(hours=1), key="k1", repo="acme/app")
    charge(store, 3_000, T0 - timedelta(hours=30), key="k2", repo="acme/lib")
    charge(store, 9_000, T0 - timedelta(hours=2), key="k3", repo="globex/site")
    charge(store, 500, T0 - timedelta(hours=3), key="k4", repo="initech/new")
    body = Governor(store, config).snapshot(T0).as_json()
    assert body["per_installation_pct"] == 50
    assert body["repository_reviews_per_day"] == {"acme/app": 3}
    shown = {i["installation_id"]: {name: w["charged"] for name, w in i["windows"].items()}
             for i in body["installations"]}  # type: ignore[attr-defined]
    assert shown == {
        GLOBEX: {"session": 9_000, "daily": 9_000, "weekly": 9_000},
        ACME: {"session": 4_000, "daily": 4_000, "weekly": 7_000},
        None: {"session": 500, "daily": 500, "weekly": 500},
    }
    assert [i["installation_id"] for i in body["installations"]] == [  # type: ignore[attr-defined]
        GLOBEX, ACME, None]
    lines = render(body)
    assert any("per-installation cap 50% of each window" in line for line in lines)
    assert "repository caps (runs per 24 h): acme/app 3" in lines
    row = next(line for line in lines if line.startswith(str(ACME)))
    assert row.split() == [str(ACME), "4000", "/", "50000", "4000", "/", str(
        config.daily_limit // 2), "7000", "/", str(config.weekly_limit // 2)]
    assert any(line.startswith("(not installed)") for line in lines)


# -- the race ------------------------------------------------------------------------------

Opener = Callable[[], Database]


@contextmanager
def backend(name: str, tmp_path: Path) -> Iterator[Opener]:
    if name == "sqlite":
        path = tmp_path / "state.db"
        yield lambda: SqliteStore(path)
        return
    with throwaway_database() as conninfo:
        yield lambda: PostgresStore(conninfo)


@pytest.mark.parametrize("name", BACKENDS)
def test_two_installations_racing_each_stop_at_their_share(tmp_path: Path, name: str) -> None:
    """Four threads, each with its own connection and governor, drain a queue where one
    installation's thirty requests stand in front of another's: neither passes 50 % of any
    window, and the second installation's work is admitted all the same."""
    config = budget(session_tokens=100_000, max_run_tokens=10_000, per_installation_pct=50)
    with backend(name, tmp_path) as opener:
        with opener() as setup:
            install(setup, "acme/app", ACME)
            install(setup, "globex/site", GLOBEX)
            queue = QueueDriver(setup, lease=LEASE)
            for n in range(30):  # thirty different people: the per-person cap plays no part
                queue.enqueue(mention(100 + n, n, repo="acme/app", actor=1000 + n), now=T0)
            for n in range(30):
                queue.enqueue(mention(200 + n, n, repo="globex/site", actor=2000 + n),
                              now=T0 + timedelta(seconds=1))
            Governor(setup, config)  # publishes the shared policy once, before the race
        def within_share(conn: Transaction, claim: Claim, now: datetime) -> list[str]:
            inst = ACME if claim.job.repo == "acme/app" else GLOBEX
            return [f"{inst} {mine}" for window, mine in zip(
                measure(conn, now, config), measure_actor(conn, now, inst, installation=True),
                strict=True) if mine.charged > window.limit // 2]

        assert drain_racing(opener, config, within_share) == []
        with opener() as store, store.read() as conn:
            admitted = Counter(int(i) for (i,) in conn.execute(
                "SELECT installation_id FROM ledger"))
        assert admitted == {ACME: 5, GLOBEX: 5}


def test_the_installation_share_reads_its_index(sqlite_store: SqliteStore) -> None:
    from service.budget.windows import WINDOWS
    from service.storage.ledger_windows import INSTALLATION_SQL
    stamp = to_db_time(T0)
    with sqlite_store.read() as conn:
        plan = " | ".join(r[3] for r in conn.execute(
            "EXPLAIN QUERY PLAN " + INSTALLATION_SQL,
            {**{w.name: stamp for w in WINDOWS}, "actor": 1}))
    assert "USING INDEX ledger_installation_window (installation_id=? AND reserved_at>?)" in plan
