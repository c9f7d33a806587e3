"""A worker that died holding a claim: its lease lapses and the row is recovered by the
next claim whether or not that claim admits anything (issue: a claim left ``claimed``
with a dead lease for as long as the budget stayed exhausted)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.budget.governor import Governor
from service.storage.database import Database
from service.storage.sqlite import SqliteStore
from tests.kit.queue import QueueDriver
from tests.queue_helpers import LEASE, T0, budget, mention


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def ledger(store: SqliteStore) -> list[tuple[object, ...]]:
    with store.read() as conn:
        return list(conn.execute("SELECT dedupe_key, stop_reason, used_tokens, reserved_tokens"
                                 " FROM ledger ORDER BY id"))


def test_a_lapsed_lease_is_recovered_even_when_nothing_can_be_admitted(
        store: SqliteStore) -> None:
    queue = QueueDriver(store, lease=LEASE)
    # A window that fits exactly one run: the dead worker's reservation fills it.
    gov = Governor(store, budget(session_tokens=10_000, max_run_tokens=10_000))
    queue.enqueue(mention(1, 1), now=T0)
    taken = queue.claim(now=T0, owner="dead", admit=gov.admit, lapsed=gov.close_lapsed)
    assert taken is not None
    # The worker is SIGKILLed here. Past its lease, the next claim admits nothing (the
    # open reservation still fills the window) — and must still recover the row.
    later = T0 + LEASE + timedelta(seconds=1)
    assert queue.claim(now=later, owner="w2", admit=gov.admit,
                       lapsed=gov.close_lapsed) is None
    row = queue.get(taken.dedupe_key)
    assert row is not None and (row.status, row.attempts, row.owner) == ("pending", 1, None)
    # The dead attempt is charged in full, closed as lost.
    assert ledger(store) == [(taken.dedupe_key, "lost", 10_000, 10_000)]
    # Refused while waiting for the budget: the person is owed a notice, as for any other.
    assert taken.dedupe_key in gov.refusals


def test_an_exhausted_row_is_abandoned_and_its_reservation_closed(store: SqliteStore) -> None:
    queue = QueueDriver(store, lease=LEASE, max_attempts=1)
    gov = Governor(store, budget(session_tokens=100_000, max_run_tokens=10_000))
    queue.enqueue(mention(1, 1), now=T0)
    taken = queue.claim(now=T0, owner="dead", admit=gov.admit, lapsed=gov.close_lapsed)
    assert taken is not None
    later = T0 + LEASE + timedelta(seconds=1)
    assert queue.claim(now=later, owner="w2", admit=gov.admit,
                       lapsed=gov.close_lapsed) is None
    row = queue.get(taken.dedupe_key)
    assert row is not None and row.status == "abandoned"
    assert ledger(store) == [(taken.dedupe_key, "lost", 10_000, 10_000)]


def test_a_live_lease_is_left_alone(store: SqliteStore) -> None:
    queue = QueueDriver(store, lease=LEASE)
    gov = Governor(store, budget(session_tokens=100_000, max_run_tokens=10_000))
    queue.enqueue(mention(1, 1), now=T0)
    taken = queue.claim(now=T0, owner="alive", admit=gov.admit, lapsed=gov.close_lapsed)
    assert taken is not None
    assert queue.claim(now=T0 + LEASE - timedelta(seconds=1), owner="w2", admit=gov.admit,
                       lapsed=gov.close_lapsed) is None
    row = queue.get(taken.dedupe_key)
    assert row is not None and (row.status, row.owner) == ("claimed", "alive")
    assert [r[1] for r in ledger(store)] == [None]
