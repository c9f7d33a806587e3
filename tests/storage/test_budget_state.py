"""``budget_state`` and ``budget_policy``: the breaker's keys and the shared policy row."""

from __future__ import annotations

from datetime import timedelta

from service.storage import budget_state
from service.storage.database import Database
from tests.queue_helpers import T0


def test_state_is_written_replaced_read_and_deleted(database: Database) -> None:
    with database.transaction() as tx:
        budget_state.write_state(tx, [("a", "1"), ("b", "2")])
        budget_state.write_state(tx, [("a", "3")])
    with database.read() as tx:
        assert budget_state.read_state(tx, ["a", "b", "c"]) == {"a": "3", "b": "2"}
    with database.transaction() as tx:
        assert budget_state.delete_state(tx, ["a", "c"]) == 1
    with database.read() as tx:
        assert budget_state.read_state(tx, ["a", "b"]) == {"b": "2"}


def test_the_policy_is_published_once_unless_replaced(database: Database) -> None:
    with database.read() as tx:
        assert budget_state.read_policy(tx) is None
    with database.transaction() as tx:
        assert budget_state.publish_policy(tx, authority="o/a", policy="{}", now=T0,
                                           replace=False)
        assert not budget_state.publish_policy(tx, authority="o/b", policy="{1}", now=T0,
                                               replace=False)
    with database.read() as tx:
        first = budget_state.read_policy(tx)
    assert first is not None and (first.authority, first.policy) == ("o/a", "{}")
    with database.transaction() as tx:
        assert budget_state.publish_policy(tx, authority="o/b", policy="{2}",
                                           now=T0 + timedelta(hours=1), replace=True)
    with database.read() as tx:
        second = budget_state.read_policy(tx)
    assert second is not None and (second.authority, second.policy) == ("o/b", "{2}")
    assert second.written_at > first.written_at
