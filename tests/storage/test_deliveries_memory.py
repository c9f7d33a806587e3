"""Delivery ids are remembered while GitHub can redeliver them (3 days) plus a margin
(``deliveries.MEMORY``, 7 days), then pruned by the maintenance loop a batch at a time;
both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.app.retention import forget_deliveries
from service.storage import deliveries
from service.storage.database import Database
from service.storage.deliveries import MEMORY, DeliveryRow

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _record(store: Database, *ages: timedelta, prefix: str = "d") -> list[str]:
    ids = [f"{prefix}-{i}" for i in range(len(ages))]
    with store.transaction() as tx:
        deliveries.record(tx, [DeliveryRow(i, "ping", None, None, NOW - age, "ping")
                               for i, age in zip(ids, ages, strict=True)])
    return ids


def test_a_delivery_github_could_still_redeliver_is_kept(database: Database) -> None:
    old, edge, young, new = _record(database, MEMORY + timedelta(seconds=1), MEMORY,
                                    timedelta(days=3), timedelta(0))
    assert MEMORY >= timedelta(days=3) + timedelta(days=4)  # GitHub's window, and a margin
    assert forget_deliveries(database, NOW) == 1
    with database.read() as tx:
        assert deliveries.seen(tx, [old, edge, young, new]) == {edge, young, new}


def test_a_backlog_drains_in_short_batches(database: Database) -> None:
    _record(database, *([MEMORY + timedelta(hours=1)] * 25), prefix="old")
    kept = _record(database, timedelta(hours=1), prefix="new")
    # 25 old ids, batches of 10, at most 2 batches a round: 20 now, the rest next round.
    assert forget_deliveries(database, NOW, batch=10, batches=2) == 20
    assert forget_deliveries(database, NOW, batch=10, batches=2) == 5
    assert forget_deliveries(database, NOW, batch=10, batches=2) == 0
    with database.read() as tx:
        (count,) = tx.execute("SELECT COUNT(*) FROM deliveries").fetchone()
        assert count == 1 and deliveries.seen(tx, kept) == set(kept)
