"""``closed_pull_requests``: which pull requests closed, when, and whether purged."""

from __future__ import annotations

from datetime import timedelta

from service.storage import closures
from service.storage.database import Database
from tests.queue_helpers import T0


def test_a_close_is_recorded_and_a_second_one_replaces_it(database: Database) -> None:
    with database.transaction() as tx:
        closures.record_close(tx, "o/r", 1, merged=False, at=T0)
        closures.record_close(tx, "o/r", 1, merged=True, at=T0 + timedelta(hours=1))
    with database.read() as tx:
        assert closures.closed_at(tx, "o/r", 1) == T0 + timedelta(hours=1)
        assert closures.closed_at(tx, "o/r", 2) is None


def test_purges_are_stamped_once_for_closes_at_or_before_the_cutoff(
        database: Database) -> None:
    with database.transaction() as tx:
        closures.record_close(tx, "o/r", 1, merged=False, at=T0)
        closures.record_close(tx, "o/r", 2, merged=True, at=T0 + timedelta(days=2))
    with database.transaction() as tx:
        assert closures.stamp_purged(tx, now=T0 + timedelta(days=3),
                                     cutoff=T0 + timedelta(days=1)) == 1
        assert closures.stamp_purged(tx, now=T0 + timedelta(days=3),
                                     cutoff=T0 + timedelta(days=1)) == 0
        # Closing again (after a reopen) un-stamps it: its new content may be purged again.
        closures.record_close(tx, "o/r", 1, merged=False, at=T0 + timedelta(days=3))
        assert closures.stamp_purged(tx, now=T0 + timedelta(days=4),
                                     cutoff=T0 + timedelta(days=3)) == 2
