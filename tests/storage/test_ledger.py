"""The ledger table's lifecycle (``service.storage.ledger.TRANSITIONS``): a reservation is
open until it is settled or lost, exactly once, and every write keeps to the table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.storage import ledger
from service.storage.database import Database
from service.storage.times import to_db_time

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def _reserve(store: Database, key: str, owner: str = "w1") -> int:
    with store.transaction() as tx:
        ledger.reserve(tx, ledger.Reservation(dedupe_key=key, owner=owner, actor_id=7,
                                              mode="full", tokens=1000, repo="o/r",
                                              pr_number=1), T0)
        (row_id,) = tx.execute("SELECT MAX(id) FROM ledger").fetchone()
    return int(row_id)


def _settlement(tokens: int | None = 400) -> ledger.Settlement:
    return ledger.Settlement(tokens=tokens, confidence="exact", engine="e", model="m",
                             stop_reason="completed", reviewed_lines=10, reviewed_since=None,
                             cost_usd=None)


def _state(store: Database, row_id: int) -> str | None:
    with store.read() as tx:
        return ledger.state(tx, row_id)


def test_the_table_names_one_target_per_event_and_only_leaves_open() -> None:
    assert {event for event, _ in ledger.TRANSITIONS} == {"settle", "lose"}
    assert {source for _, source in ledger.TRANSITIONS} == {ledger.OPEN}
    assert (ledger.target("settle"), ledger.target("lose")) == (ledger.SETTLED, ledger.LOST)


def test_a_reservation_is_open_then_settled_once(store: Database) -> None:
    row = _reserve(store, "k")
    assert _state(store, row) == ledger.OPEN
    with store.transaction() as tx:
        assert ledger.settle(tx, "k", "w1", _settlement(), T0 + timedelta(minutes=5))
        assert not ledger.settle(tx, "k", "w1", _settlement(9), T0 + timedelta(minutes=6))
        assert ledger.lose(tx, "k", T0 + timedelta(minutes=7)) == 0  # settled is final
    assert _state(store, row) == ledger.SETTLED
    with store.read() as tx:
        assert ledger.latest(tx, "k") == {"stop_reason": "completed", "used_tokens": 400,
                                          "usage_confidence": "exact",
                                          "reserved_tokens": 1000, "mode": "full"}


def test_a_lost_reservation_is_charged_in_full_and_cannot_be_settled(
        store: Database) -> None:
    row = _reserve(store, "k")
    with store.transaction() as tx:
        assert ledger.lose(tx, "k", T0 + timedelta(minutes=1)) == 1
        assert not ledger.settle(tx, "k", "w1", _settlement(), T0 + timedelta(minutes=2))
        assert ledger.open_mode(tx, "k", "w1") is None
        assert ledger.open_reserved(tx, "k", "w1") is None
    assert _state(store, row) == ledger.LOST
    with store.read() as tx:
        assert ledger.latest(tx, "k")["used_tokens"] == 1000  # type: ignore[index]


def test_only_the_owner_settles(store: Database) -> None:
    row = _reserve(store, "k", owner="w1")
    with store.transaction() as tx:
        assert ledger.open_mode(tx, "k", "w2") is None
        assert not ledger.settle(tx, "k", "w2", _settlement(), T0)
        assert ledger.open_mode(tx, "k", "w1") == "full"
    assert _state(store, row) == ledger.OPEN


def test_a_row_whose_columns_contradict_the_lifecycle_is_refused(store: Database) -> None:
    row = _reserve(store, "k")
    with store.transaction() as tx:  # settled_at stamped by hand, stop_reason left NULL
        tx.execute("UPDATE ledger SET settled_at = ? WHERE id = ?", (to_db_time(T0), row))
    with pytest.raises(RuntimeError, match="0 states"):
        _state(store, row)
    assert _state(store, row + 1) is None
