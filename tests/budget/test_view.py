"""What an admit reads, read once through one transaction: the shared policy applied to
the local config, the breaker's calibration, the windows at their effective limits and,
when asked, the dollar window — on both backends."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from service.budget.policy import publish
from service.budget.view import read_view
from service.storage import ledger
from service.storage.database import Database
from tests.queue_helpers import budget

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_an_empty_store_reads_the_local_config_and_empty_windows(database: Database) -> None:
    local = budget(session_tokens=100_000)
    with database.read() as conn:
        view = read_view(conn, NOW, local, dollars=False)
    assert view.config == local and view.policy is None
    assert view.pct == 100 and view.dollars is None
    assert [w.name for w in view.windows] == ["session", "daily", "weekly"]
    assert all(w.spent == w.reserved == 0 for w in view.windows)
    assert view.gauges == view.windows


def test_an_open_reservation_is_charged_in_full_in_every_window(database: Database) -> None:
    with database.transaction() as conn:
        ledger.reserve(conn, ledger.Reservation(
            dedupe_key="k", owner="w1", actor_id=7, mode="full", tokens=9_000,
            repo="o/r", pr_number=1), NOW)
    with database.read() as conn:
        view = read_view(conn, NOW, budget(), dollars=False)
    assert [w.reserved for w in view.windows] == [9_000, 9_000, 9_000]


def test_the_shared_policy_is_applied_over_the_local_config(database: Database) -> None:
    shared = budget(session_tokens=50_000)
    with database.transaction() as conn:
        assert publish(conn, shared, authority="host-a", now=NOW, replace=False)
    with database.read() as conn:
        view = read_view(conn, NOW, budget(session_tokens=900_000), dollars=False)
    assert view.policy is not None and view.policy.authority == "host-a"
    assert view.config.session_tokens == 50_000


def test_the_dollar_window_is_read_only_when_asked_and_on_the_ladder_only_when_capped(
        database: Database) -> None:
    with database.read() as conn:
        uncapped = read_view(conn, NOW, budget(), dollars=True)
        capped = read_view(conn, NOW, dataclasses.replace(budget(), monthly_usd=50.0),
                           dollars=True)
    assert uncapped.dollars is not None and uncapped.dollars.limit_micro is None
    assert uncapped.gauges == uncapped.windows
    assert capped.dollars is not None and capped.dollars.limit_micro == 50_000_000
    assert capped.gauges == (*capped.windows, capped.dollars)
