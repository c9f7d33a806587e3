"""A run's publication lifecycle (``service.storage.runs.TRANSITIONS``): recorded, leased by
one attempt at a time, then concluded or failed; its content held until purged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.storage import closures, runs
from service.storage.database import Database

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)


@pytest.fixture
def store(database: Database) -> Database:  # each test on SQLite and on PostgreSQL
    with database.transaction() as tx:
        runs.insert(tx, runs.RunRow(dedupe_key="k", repo="o/r", pr_number=1,
                                    head_sha="a" * 40, outcome="completed", findings="[]",
                                    recorded_at=T0, omitted="[]", assessment=None,
                                    description=None))
    return database


def _state(store: Database, now: datetime = T0) -> tuple[str, str] | None:
    with store.read() as tx:
        return runs.state(tx, "k", now)


def test_the_table_has_one_target_per_event_and_source() -> None:
    events = {event for event, _ in runs.TRANSITIONS}
    assert events == {"lease", "renew", "release", "fail", *runs.CONCLUSIONS,
                      *runs.OPERATOR_EVENTS}
    for (_, source), target in runs.TRANSITIONS.items():
        assert source in runs.STATES and target in runs.STATES
    # The first conclusion stands, except that an operator may republish a dry run.
    assert not any(source in runs.CONCLUSIONS.values() for event, source in runs.TRANSITIONS
                   if event not in runs.OPERATOR_EVENTS)
    assert {(e, s) for e, s in runs.TRANSITIONS if e in runs.OPERATOR_EVENTS} == {
        ("republish", runs.FAILED), ("republish", runs.DRY_RUN)}
    assert runs.CONTENT_TRANSITIONS == {("purge", runs.HELD): runs.PURGED}


def test_one_attempt_at_a_time_holds_the_lease(store: Database) -> None:
    assert _state(store) == (runs.RECORDED, runs.HELD)
    with store.transaction() as tx:
        assert runs.lease(tx, "k", T0, T0 + LEASE)
        assert not runs.lease(tx, "k", T0 + timedelta(seconds=1), T0 + LEASE)
        assert runs.pending(tx, T0 + timedelta(seconds=1), 10) == []
    assert _state(store, T0 + timedelta(seconds=1)) == (runs.LEASED, runs.HELD)
    # A lapsed lease is a recorded run again: offered, and leased by the next attempt.
    assert _state(store, T0 + LEASE) == (runs.RECORDED, runs.HELD)
    with store.transaction() as tx:
        assert not runs.renew(tx, "k", T0 + LEASE, T0 + 2 * LEASE)
        assert runs.pending(tx, T0 + LEASE, 10) == ["k"]
        assert runs.lease(tx, "k", T0 + LEASE, T0 + 2 * LEASE)
        assert runs.renew(tx, "k", T0 + LEASE, T0 + 3 * LEASE)
        (attempts,) = tx.execute("SELECT publish_attempts FROM runs").fetchone()
    assert attempts == 2


def test_the_first_conclusion_stands(store: Database) -> None:
    with store.transaction() as tx:
        assert runs.lease(tx, "k", T0, T0 + LEASE)
        assert runs.conclude(tx, "k", outcome=runs.PUBLISHED, published_at=T0, comment_id=5)
        assert not runs.conclude(tx, "k", outcome=runs.DRY_RUN, published_at=None,
                                 comment_id=None)
        runs.fail(tx, "k", T0)  # too late: publication ended
        assert not runs.lease(tx, "k", T0 + LEASE, T0 + 2 * LEASE)
    assert _state(store, T0 + LEASE) == (runs.PUBLISHED, runs.HELD)
    with pytest.raises(ValueError, match="publish outcome"):
        with store.transaction() as tx:
            runs.conclude(tx, "k", outcome="posted", published_at=None, comment_id=None)


def test_a_failed_run_is_offered_no_more_but_may_still_conclude(store: Database) -> None:
    with store.transaction() as tx:
        assert runs.lease(tx, "k", T0, T0 + LEASE)
        runs.fail(tx, "k", T0)
        assert runs.pending(tx, T0 + LEASE, 10) == []
        assert not runs.lease(tx, "k", T0 + LEASE, T0 + 2 * LEASE)
    assert _state(store) == (runs.FAILED, runs.HELD)
    with store.transaction() as tx:  # an attempt that finished late records what it did
        assert runs.conclude(tx, "k", outcome=runs.REFUSED, published_at=None,
                             comment_id=None)
    assert _state(store) == (runs.REFUSED, runs.HELD)


def test_a_purged_run_is_never_leased(store: Database) -> None:
    with store.transaction() as tx:
        closures.record_close(tx, "o/r", 1, merged=True, at=T0)
        assert runs.purge_closed(tx, now=T0 + timedelta(hours=1), cutoff=T0) == 1
        assert not runs.lease(tx, "k", T0, T0 + LEASE)
        assert runs.pending(tx, T0, 10) == []
    assert _state(store) == (runs.RECORDED, runs.PURGED)


def test_release_hands_the_run_back(store: Database) -> None:
    with store.transaction() as tx:
        assert runs.lease(tx, "k", T0, T0 + LEASE)
        runs.release(tx, "k")
        assert runs.pending(tx, T0, 10) == ["k"]
    assert _state(store) == (runs.RECORDED, runs.HELD)
