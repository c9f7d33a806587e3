"""``repository_polls``: each repository's last poll, for the status page (both backends:
this statement once failed on PostgreSQL alone)."""

from __future__ import annotations

from datetime import timedelta

from service.storage import repository_polls
from service.storage.database import Database
from service.storage.repository_polls import MAX_ERROR, Poll
from tests.queue_helpers import T0


def test_a_success_and_a_failure_are_recorded_and_the_last_success_kept(
        database: Database) -> None:
    later = T0 + timedelta(minutes=5)
    with database.transaction() as tx:
        repository_polls.record(tx, [("o/a", None), ("o/b", "GitHub said 502")], T0)
    with database.transaction() as tx:
        repository_polls.record(tx, [("o/a", "x" * (MAX_ERROR + 50)), ("o/b", None)], later)
    with database.read() as tx:
        polls = repository_polls.latest(tx)
    assert polls == [Poll("o/a", later, T0, "x" * MAX_ERROR), Poll("o/b", later, later, None)]


def test_latest_is_bounded_and_in_name_order(database: Database) -> None:
    with database.transaction() as tx:
        repository_polls.record(tx, [(f"o/{c}", None) for c in "dcba"], T0)
    with database.read() as tx:
        assert [p.repo for p in repository_polls.latest(tx, limit=3)] == ["o/a", "o/b", "o/c"]


def test_the_last_success_of_each_repository_for_the_schedule(database: Database) -> None:
    with database.transaction() as tx:
        repository_polls.record(tx, [("o/a", None), ("o/b", "GitHub said 502")], T0)
        repository_polls.record(tx, [("o/a", "later failed")], T0 + timedelta(minutes=5))
    with database.read() as tx:
        assert repository_polls.succeeded(tx) == {"o/a": T0}  # o/b never succeeded
