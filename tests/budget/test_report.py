"""What ``pr-review-agent budget`` prints: the very body ``GET /budget`` returns, rendered as
text, so the command and the endpoint cannot show different numbers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path

from service.budget.governor import Governor
from service.budget.report import render
from service.storage import ledger
from service.storage.sqlite import SqliteStore
from tests.kit.stores import new_sqlite_store
from tests.queue_helpers import budget

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _body(store: SqliteStore, **config: object) -> dict[str, object]:
    governor = Governor(store, dataclasses.replace(budget(session_tokens=100_000), **config),
                        clock=lambda: NOW, authority="host-a")
    return governor.snapshot(NOW).as_json()


def test_the_lines_say_the_mode_the_caps_the_breaker_and_the_policy(
        tmp_path: Path) -> None:
    with new_sqlite_store(tmp_path / "state.db") as store:
        with store.transaction() as tx:
            ledger.reserve(tx, ledger.Reservation(
                dedupe_key="k", owner="w1", actor_id=7, mode="full", tokens=10_000,
                repo="o/r", pr_number=1), NOW)
        lines = render(_body(store, per_actor_pct=50))
    assert lines[0] == ("budget at 2026-06-01T12:00:00+00:00: mode full (enabled); "
                        "tightest window session")
    assert lines[1] == ("runs: 10000 tokens reserved each; per-person cap 50% of each window; "
                        "per-installation cap off; pacer 5 run(s) per pull request per 24 h")
    assert lines[2].startswith("breaker: closed; limits at 100%")
    assert lines[3].startswith("policy: published by host-a at ")
    header = lines[4].split()
    assert header[:6] == ["window", "limit", "configured", "spent", "reserved", "remaining"]
    session = next(line.split() for line in lines if line.startswith("session"))
    assert session[1:6] == ["100000", "100000", "0", "10000", "90000"]
    assert session[6] == "10.0%"
    assert any(line.startswith("monthly dollars (30 days): limit none") for line in lines)


def test_a_disabled_budget_says_so(tmp_path: Path) -> None:
    with new_sqlite_store(tmp_path / "state.db") as store:
        lines = render(_body(store, enabled=False))
    assert "(DISABLED)" in lines[0]
