"""``hook_redeliveries``: the deliveries the delivery log's reader asked GitHub to send
again, by guid, until they are in, and pruned with the delivery ids."""

from __future__ import annotations

from datetime import timedelta

from service.storage import redeliveries
from service.storage.database import Database
from service.storage.deliveries import MEMORY
from service.storage.redeliveries import Requested
from tests.queue_helpers import T0


def test_a_redelivery_asked_for_stands_until_it_is_done(database: Database) -> None:
    with database.transaction() as tx:
        redeliveries.requested(tx, "g1", 101, T0)
        redeliveries.requested(tx, "g2", 102, T0 + timedelta(seconds=5))
        redeliveries.requested(tx, "g1", 109, T0 + timedelta(minutes=5))  # the first stands
    with database.read() as tx:
        assert redeliveries.pending(tx) == {
            "g1": Requested(101, T0), "g2": Requested(102, T0 + timedelta(seconds=5))}
    with database.transaction() as tx:
        redeliveries.done(tx, ["g1", "unknown"])
        redeliveries.done(tx, [])
    with database.read() as tx:
        assert set(redeliveries.pending(tx)) == {"g2"}


def test_prune_forgets_what_was_asked_for_as_long_ago_as_a_delivery_is_remembered(
        database: Database) -> None:
    with database.transaction() as tx:
        redeliveries.requested(tx, "old", 1, T0)
        redeliveries.requested(tx, "recent", 2, T0 + MEMORY)
    with database.transaction() as tx:
        assert redeliveries.prune(tx, now=T0 + MEMORY + timedelta(minutes=1)) == 1
    with database.read() as tx:
        assert set(redeliveries.pending(tx)) == {"recent"}
