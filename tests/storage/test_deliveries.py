"""``deliveries``: each webhook delivery id, recorded once and forgotten after its memory."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.storage import deliveries
from service.storage.database import Database
from service.storage.deliveries import MEMORY, DeliveryRow
from service.storage.errors import STORE_ERRORS
from tests.queue_helpers import T0


def row(delivery_id: str, at: object = T0) -> DeliveryRow:
    return DeliveryRow(delivery_id, "pull_request", "opened", 5, at, "enqueued")  # type: ignore[arg-type]


def test_recorded_ids_are_seen_and_a_second_record_is_refused(database: Database) -> None:
    with database.transaction() as tx:
        deliveries.record(tx, [row("a"), row("b")])
        deliveries.record(tx, [])
    with database.read() as tx:
        assert deliveries.seen(tx, ["a", "b", "c"]) == {"a", "b"}
        assert deliveries.seen(tx, []) == set()
    with pytest.raises(STORE_ERRORS), database.transaction() as tx:
        deliveries.record(tx, [row("a")])


def test_prune_forgets_the_oldest_past_the_memory_in_batches(database: Database) -> None:
    with database.transaction() as tx:
        deliveries.record(tx, [row(f"old-{n}", T0 + timedelta(seconds=n)) for n in range(5)])
        deliveries.record(tx, [row("recent", T0 + MEMORY)])
    now = T0 + MEMORY + timedelta(minutes=1)
    with database.transaction() as tx:
        assert deliveries.prune(tx, now=now, limit=3) == 3
        assert deliveries.prune(tx, now=now, limit=3) == 2
        assert deliveries.prune(tx, now=now, limit=3) == 0
    with database.read() as tx:
        assert deliveries.seen(tx, ["old-0", "old-4", "recent"]) == {"recent"}
