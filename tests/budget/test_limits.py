"""The REDUCED rung, the pacer and the per-person cap."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from service.budget.breaker import BreakerState, write_breaker
from service.budget.governor import Governor
from service.budget.ladder import Mode
from service.budget.usage import Usage
from service.budget.windows import measure, measure_actor
from service.storage.database import Database, Transaction
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.queue_helpers import LEASE, T0, budget, drain_racing, mention, opened


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def charge(store: SqliteStore, tokens: int, at: datetime, *, key: str, actor: int = 1,
           repo: str | None = None, pr: int | None = None, stop: str = "completed") -> None:
    with store.transaction() as conn:
        conn.execute(
            "INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens, used_tokens,"
            " usage_confidence, reserved_at, settled_at, stop_reason, repo, pr_number)"
            " VALUES (?, 'old', ?, 'full', ?, ?, 'exact', ?, ?, ?, ?, ?)",
            (key, actor, max(tokens, 1), tokens, to_db_time(at), to_db_time(at), stop, repo, pr))


# -- the REDUCED rung -------------------------------------------------------------------------

@pytest.mark.parametrize(("charged", "mode"), [
    (0, Mode.FULL), (59_999, Mode.FULL), (60_000, Mode.REDUCED), (84_999, Mode.REDUCED),
    (85_000, Mode.MENTION_ONLY),
])
def test_reduced_starts_at_exactly_60_percent(store: SqliteStore, charged: int,
                                              mode: Mode) -> None:
    if charged:
        charge(store, charged, T0 - timedelta(hours=1), key="k")
    assert Governor(store, budget(session_tokens=100_000, max_run_tokens=1)).snapshot(
        T0).mode is mode


def test_a_reduced_run_is_admitted_recorded_and_reported_to_the_worker(
        store: SqliteStore) -> None:
    charge(store, 60_000, T0 - timedelta(hours=1), key="k")
    queue = QueueDriver(store, lease=LEASE)
    gov = Governor(store, budget(session_tokens=100_000, max_run_tokens=10_000))
    queue.enqueue(opened(1), now=T0)  # automatic reviews still run, reduced
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None and c.job.kind == "pr_opened"
    with store.read() as conn:
        (mode,) = conn.execute("SELECT mode FROM ledger WHERE dedupe_key = ?",
                               (c.dedupe_key,)).fetchone()
    assert mode == "reduced"
    assert gov.mode_of(c) is Mode.REDUCED and gov.mode_of(c).engine_mode == "reduced"
    gov.settle(c, Usage(1_000, "exact", "e", None), now=T0)
    with pytest.raises(LookupError, match="no open reservation"):
        gov.mode_of(c)


def test_full_and_mention_only_runs_tell_the_engine_what_to_do(store: SqliteStore) -> None:
    queue = QueueDriver(store, lease=LEASE)
    gov = Governor(store, budget(session_tokens=100_000, max_run_tokens=5_000))
    queue.enqueue(mention(1, 1), now=T0)
    first = queue.claim(now=T0, owner="a", admit=gov.admit)
    assert first is not None and gov.mode_of(first) is Mode.FULL
    assert Mode.FULL.engine_mode == "full"
    charge(store, 85_000, T0 - timedelta(hours=1), key="k")
    queue.enqueue(mention(2, 2), now=T0)
    second = queue.claim(now=T0, owner="b", admit=gov.admit)
    assert second is not None
    with store.transaction() as conn:  # readable inside the caller's transaction too
        assert gov.mode_of(second, conn=conn) is Mode.MENTION_ONLY
    assert Mode.MENTION_ONLY.engine_mode == "reduced"


# -- the pacer --------------------------------------------------------------------------------

def run_once(queue: QueueDriver, gov: Governor, now: datetime, *, tokens: int = 1_000,
             stop: str = "completed") -> Claim | None:
    c = queue.claim(now=now, owner="w", admit=gov.admit)
    if c is not None:
        assert gov.settle(c, Usage(tokens, "exact", "e", None), now=now, stop_reason=stop)
        assert queue.finish(c.dedupe_key, c.lease.owner)
    return c


def test_the_pacer_admits_max_reviews_per_pr_runs_per_24_hours(store: SqliteStore) -> None:
    queue = QueueDriver(store, lease=LEASE)
    gov = Governor(store, budget(max_reviews_per_pr=2))
    for n in (1, 2, 3):
        queue.enqueue(mention(1, n), now=T0)
    queue.enqueue(mention(2, 9), now=T0 + timedelta(seconds=1))
    first = T0 + timedelta(minutes=1)
    assert run_once(queue, gov, first) is not None
    assert run_once(queue, gov, first + timedelta(hours=1)) is not None
    # The third run of pull request 1 is refused; the walk moves on to pull request 2.
    other = run_once(queue, gov, first + timedelta(hours=2))
    assert other is not None and other.job.pr_number == 2
    refusal = gov.refusals["mention:o/r:1:3"]
    assert (refusal.reason, refusal.window, refusal.frees_at) == (
        "pacer", None, first + timedelta(hours=24))
    assert queue.get("mention:o/r:1:3").attempts == 0  # type: ignore[union-attr]
    assert run_once(queue, gov, first + timedelta(hours=23, minutes=59)) is None
    assert run_once(queue, gov, first + timedelta(hours=24)) is not None


@pytest.mark.parametrize(("stop", "tokens", "counts"), [
    ("closed", 0, False), ("refused", 0, False), ("engine_unavailable", 0, False),
    ("completed", 0, True),    # a review ran
    ("refused", 500, True),    # something was spent
    ("lost", 10_000, True),
    ("usage_limit", 0, True),
])
def test_what_the_pacer_counts(store: SqliteStore, stop: str, tokens: int,
                               counts: bool) -> None:
    gov = Governor(store, budget(max_reviews_per_pr=1))
    queue = QueueDriver(store, lease=LEASE)
    charge(store, tokens, T0 - timedelta(hours=1), key="mention:o/r:1:0", repo="o/r", pr=1,
           stop=stop)
    charge(store, 5_000, T0 - timedelta(hours=1), key="x", repo="o/other", pr=1)
    queue.enqueue(mention(1, 1), now=T0)
    assert (run_once(queue, gov, T0) is None) is counts


def test_a_retried_attempt_is_not_paced_by_its_own_predecessor(store: SqliteStore) -> None:
    gov = Governor(store, budget(max_reviews_per_pr=1))
    queue = QueueDriver(store, lease=LEASE)
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(1, 2), now=T0)
    assert queue.claim(now=T0, owner="a", admit=gov.admit) is not None
    # The worker dies; once its lease lapses the same trigger is retried: the same
    # review, so its own earlier (now lost) attempt does not count against it.
    retry = run_once(queue, gov, T0 + LEASE)
    assert retry is not None and retry.dedupe_key == "mention:o/r:1:1"
    # Another trigger on the pull request sees both attempts.
    assert run_once(queue, gov, T0 + LEASE + timedelta(minutes=1)) is None
    assert gov.refusals["mention:o/r:1:2"].reason == "pacer"


# -- the per-person cap -----------------------------------------------------------------------

def test_a_person_at_their_cap_waits_while_others_are_admitted(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=10_000, per_actor_pct=50)
    at = T0 - timedelta(hours=2)
    charge(store, 45_000, at, key="k", actor=5)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    queue.enqueue(mention(1, 1, actor=5), now=T0)
    queue.enqueue(opened(2, actor=6), now=T0 + timedelta(seconds=1))
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None and c.job.actor_id == 6
    refusal = gov.refusals["mention:o/r:1:1"]
    assert (refusal.reason, refusal.window, refusal.frees_at) == (
        "per_actor", "session", at + timedelta(hours=5))
    assert queue.claim(now=at + timedelta(hours=5), owner="w", admit=gov.admit) is not None


def test_the_cap_is_a_share_of_the_calibrated_limits(store: SqliteStore) -> None:
    config = budget(session_tokens=100_000, max_run_tokens=10_000, per_actor_pct=50)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    charge(store, 25_000, T0 - timedelta(hours=1), key="k", actor=5)
    queue.enqueue(mention(1, 1, actor=5), now=T0)
    queue.enqueue(mention(2, 2, actor=6), now=T0 + timedelta(seconds=1))
    # Calibrated to 60 %: the session limit is 60 000, the cap 30 000: 5 000 left.
    with store.transaction() as conn:
        write_breaker(conn, BreakerState(calibrated_pct=60, last_trip_at=T0,
                                         tripped_until=T0 - timedelta(hours=1), trips=(T0,)))
    c = queue.claim(now=T0, owner="w", admit=gov.admit)
    assert c is not None and c.job.actor_id == 6
    assert gov.refusals["mention:o/r:1:1"].reason == "per_actor"
    # At 100 % the cap is 50 000 with 25 000 left: the same request is admitted.
    gov.reset_calibration()
    c = queue.claim(now=T0, owner="w2", admit=gov.admit)
    assert c is not None and c.job.actor_id == 5


def test_without_a_cap_one_person_may_use_the_whole_window(store: SqliteStore) -> None:
    config = budget(session_tokens=30_000, max_run_tokens=10_000)
    queue, gov = QueueDriver(store, lease=LEASE), Governor(store, config)
    for n in range(1, 5):
        queue.enqueue(mention(n, n, actor=5), now=T0)
    taken = 0
    while queue.claim(now=T0, owner=f"w{taken}", admit=gov.admit) is not None:
        taken += 1
    assert taken == 3


def test_two_people_racing_each_stop_at_their_cap(tmp_path: Path) -> None:
    """Four threads, each with its own connection and governor, drain a queue where one
    person's thirty requests stand in front of another's: neither passes 50 % of any
    window, and the second person's work is admitted all the same."""
    path = tmp_path / "state.db"
    config = budget(session_tokens=100_000, max_run_tokens=10_000, per_actor_pct=50)
    with SqliteStore(path) as store:
        queue = QueueDriver(store, lease=LEASE)
        for n in range(30):
            queue.enqueue(mention(100 + n, n, actor=1), now=T0)
        for n in range(30):
            queue.enqueue(mention(200 + n, n, actor=2), now=T0 + timedelta(seconds=1))
        Governor(store, config)  # publishes the shared policy once, before the race

    def within_share(conn: Transaction, claim: Claim, now: datetime) -> list[str]:
        return [f"{claim.job.actor_id} {mine}" for window, mine in zip(
            measure(conn, now, config), measure_actor(conn, now, claim.job.actor_id),
            strict=True) if mine.charged > window.limit // 2]

    assert drain_racing(lambda: SqliteStore(path), config, within_share) == []
    with SqliteStore(path) as store, store.read() as conn:
        admitted = Counter(actor for (actor,) in conn.execute("SELECT actor_id FROM ledger"))
    assert admitted == {1: 5, 2: 5}


def test_the_pacer_and_the_cap_read_their_indexes(sqlite_store: SqliteStore) -> None:
    store = sqlite_store  # the plans are SQLite's
    from service.budget.limits import PACER_EXEMPT
    from service.budget.windows import WINDOWS
    from service.storage.ledger_windows import ACTOR_SQL, pacer_sql
    stamp = to_db_time(T0)
    with store.read() as conn:
        pacer_plan = "EXPLAIN QUERY PLAN " + pacer_sql(PACER_EXEMPT)
        pacer = " | ".join(r[3] for r in conn.execute(pacer_plan, {
            "repo": "o/r", "pr_number": 1, "key": "k", "start": stamp}))
        actor = " | ".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + ACTOR_SQL, {
            **{w.name: stamp for w in WINDOWS}, "actor": 1}))
    assert "USING INDEX ledger_pull_request (repo=? AND pr_number=? AND reserved_at>?)" in pacer
    assert "USING INDEX ledger_actor_window (actor_id=? AND reserved_at>?)" in actor
