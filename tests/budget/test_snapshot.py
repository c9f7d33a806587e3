"""What ``GET /budget`` returns, from one snapshot of the store: the values in force, every
window with its limit, spend and reservations, and nothing the JSON cannot carry."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from service.budget.governor import Governor
from service.storage import ledger
from service.storage.database import Database
from tests.queue_helpers import budget

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def test_the_snapshot_says_what_the_store_holds(database: Database) -> None:
    governor = Governor(database, budget(session_tokens=100_000), clock=lambda: NOW)
    with database.transaction() as tx:
        ledger.reserve(tx, ledger.Reservation(
            dedupe_key="k", owner="w1", actor_id=7, mode="full", tokens=10_000,
            repo="o/r", pr_number=1), NOW)
    body = governor.snapshot(NOW).as_json()
    assert json.loads(json.dumps(body)) == body  # plain JSON all the way down
    assert (body["now"], body["enabled"], body["mode"]) == ("2026-06-01T12:00:00+00:00", True,
                                                             "full")
    assert body["max_run_tokens"] == 10_000
    session = {w["name"]: w for w in body["windows"]}["session"]  # type: ignore[union-attr]
    assert (session["limit"], session["configured_limit"]) == (100_000, 100_000)
    assert (session["spent"], session["reserved"], session["remaining"]) == (0, 10_000, 90_000)
    assert session["utilisation"] == 0.1
    assert body["breaker"]["tripped"] is False  # type: ignore[index]
    policy = body["policy"]
    assert isinstance(policy, dict) and policy["authority"] is not None  # published by it
    # The dollar window is shown without a cap too: the reservation priced at the rate.
    monthly = body["monthly"]
    assert isinstance(monthly, dict) and monthly["limit_usd"] is None
    assert monthly["reserved_usd"] > 0
