"""``agent_comments``: the ids of comments the App posted, so the rules never take one of
them for a request."""

from __future__ import annotations

from service.storage import agent_comments
from service.storage.agent_comments import AgentComments
from service.storage.database import Database
from tests.queue_helpers import T0


def test_remembered_ids_are_ours_and_remembering_twice_changes_nothing(
        database: Database) -> None:
    with database.transaction() as tx:
        agent_comments.remember(tx, "o/r", [11, 12], T0)
        agent_comments.remember(tx, "o/r", [12], T0)  # idempotent
    ours = AgentComments(database)
    assert ours(11) and ours(12) and not ours(13)
    with database.read() as tx:
        assert tx.execute("SELECT COUNT(*) FROM agent_comments").fetchone()[0] == 2


def test_a_read_inside_the_writing_transaction_sees_the_write(database: Database) -> None:
    ours = AgentComments(database)
    with database.transaction() as tx:
        agent_comments.remember(tx, "o/r", [21], T0)
        assert ours(21)  # the webhook classifies inside its own transaction


def test_which_of_many_are_ours_is_one_read(database: Database) -> None:
    with database.transaction() as tx:
        agent_comments.remember(tx, "o/r", [11, 12], T0)
    with database.read() as tx:
        assert agent_comments.ours(tx, [10, 11, 12, 13, 11]) == {11, 12}
        assert agent_comments.ours(tx, []) == frozenset()
