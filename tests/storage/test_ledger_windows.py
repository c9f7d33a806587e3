"""What the ledger charges over a window (``service.storage.ledger_windows``), on SQLite
and on PostgreSQL: the hourly totals the triggers keep plus the partial first hour give
the same charge as the rows themselves, per window, per person and per repository."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.storage import ledger, ledger_windows
from service.storage.database import Database

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def _reserve(store: Database, key: str, at: datetime, *, actor: int = 7, tokens: int = 1000,
             repo: str = "o/r", settle: int | None = None, stop: str = "completed") -> None:
    with store.transaction() as tx:
        ledger.reserve(tx, ledger.Reservation(dedupe_key=key, owner="w1", actor_id=actor,
                                              mode="full", tokens=tokens, repo=repo,
                                              pr_number=1), at)
        if settle is not None:
            ledger.settle(tx, key, "w1", ledger.Settlement(
                tokens=settle, confidence="exact", engine="e", model="m", stop_reason=stop,
                reviewed_lines=1, reviewed_since=None, cost_usd=None), at)


@pytest.fixture
def charged(store: Database) -> Database:
    # Three hours of rows: a settled one two hours back (only in ledger_hours' whole
    # hours), a settled one at the window's partial first hour, an open one now.
    _reserve(store, "a", T0 - timedelta(hours=2, minutes=10), settle=300)
    _reserve(store, "b", T0 - timedelta(minutes=50), actor=8, settle=200)
    _reserve(store, "c", T0 - timedelta(minutes=5))
    return store


def test_a_window_counts_what_settled_rows_spent_and_open_ones_hold(charged: Database) -> None:
    with charged.read() as tx:
        assert ledger_windows.window_charge(tx, T0 - timedelta(hours=3)) == (
            300 + 200 + 1000, 1000, T0 - timedelta(hours=2, minutes=10))
        # Starting inside an hour: that hour's earlier rows are left out.
        assert ledger_windows.window_charge(tx, T0 - timedelta(minutes=55)) == (
            200 + 1000, 1000, T0 - timedelta(minutes=50))
        assert ledger_windows.window_charge(tx, T0) == (0, 0, None)


def test_every_window_in_one_statement_agrees_with_each_alone(charged: Database) -> None:
    starts = [T0 - timedelta(minutes=30), T0 - timedelta(hours=1), T0 - timedelta(days=7)]
    with charged.read() as tx:
        assert ledger_windows.window_charges(tx, starts) == [
            ledger_windows.window_charge(tx, start) for start in starts]


def test_a_persons_charge_is_their_rows_only(charged: Database) -> None:
    starts = [("session", T0 - timedelta(hours=1)), ("weekly", T0 - timedelta(days=7))]
    with charged.read() as tx:
        assert ledger_windows.actor_charges(tx, 7, starts) == [
            (1000, T0 - timedelta(minutes=5)), (1300, T0 - timedelta(hours=2, minutes=10))]
        assert ledger_windows.actor_charges(tx, 8, starts) == [
            (200, T0 - timedelta(minutes=50)), (200, T0 - timedelta(minutes=50))]


def test_a_repositorys_runs_leave_out_the_candidate_and_exempt_outcomes(
        charged: Database) -> None:
    _reserve(charged, "d", T0 - timedelta(minutes=20), settle=0, stop="refused")
    with charged.read() as tx:
        times = ledger_windows.repository_times(
            tx, repo="o/r", key="c", start=T0 - timedelta(days=1), exempt=("refused",))
    assert times == [T0 - timedelta(hours=2, minutes=10), T0 - timedelta(minutes=50)]
