"""The seam both ingest paths share: one decision, one effect, whichever path is first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.ingest import AgentComments, Applied, apply_decision
from service.queue import ReviewQueue
from service.store import SqliteStore, to_db_time
from service.triggers import Close, Enqueue, Ignore
from tests.queue_helpers import T0, mention, opened


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "state.db") as s:
        yield s


def test_enqueue_then_the_same_event_again_is_a_duplicate(store: SqliteStore) -> None:
    queue = ReviewQueue(store)
    with store.transaction() as conn:
        first = apply_decision(conn, queue, Enqueue(mention(1, 5)), now=T0)
    with store.transaction() as conn:
        second = apply_decision(conn, queue, Enqueue(mention(1, 5)), now=T0)
    assert first == Applied(enqueued=["mention:o/r:1:5"])
    assert second == Applied(duplicates=["mention:o/r:1:5"])
    assert len(queue.rows()) == 1


def test_close_cancels_pending_rows_and_records_the_closure(store: SqliteStore) -> None:
    queue = ReviewQueue(store)
    queue.enqueue(opened(3), now=T0)
    queue.enqueue(mention(3, 8), now=T0)
    queue.enqueue(mention(4, 9), now=T0)
    with store.transaction() as conn:
        applied = apply_decision(conn, queue, Close("o/r", 3, merged=True), now=T0)
    assert sorted(applied.cancelled) == ["mention:o/r:3:8", "pr_opened:o/r:3:" + "a" * 40]
    with store.read() as conn:
        rows = conn.execute("SELECT repo, pr_number, merged, closed_at, purged_at"
                            " FROM closed_pull_requests").fetchall()
    assert [tuple(r) for r in rows] == [("o/r", 3, 1, to_db_time(T0), None)]
    assert queue.get("mention:o/r:4:9").status == "pending"  # type: ignore[union-attr]


def test_a_closure_that_rolls_back_cancels_nothing(store: SqliteStore) -> None:
    queue = ReviewQueue(store)
    queue.enqueue(mention(3, 8), now=T0)

    def crash_before_commit() -> None:
        with store.transaction() as conn:
            apply_decision(conn, queue, Close("o/r", 3, merged=False), now=T0)
            raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        crash_before_commit()
    assert queue.get("mention:o/r:3:8").status == "pending"  # type: ignore[union-attr]
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM closed_pull_requests").fetchone()[0] == 0


def test_ignore_records_its_reason(store: SqliteStore) -> None:
    with store.transaction() as conn:
        applied = apply_decision(conn, ReviewQueue(store), Ignore("draft"), now=T0)
    assert applied == Applied(ignored="draft")


def test_agent_comments_lookup_sees_writes_of_the_same_transaction(store: SqliteStore) -> None:
    ours = AgentComments(store)
    assert ours(77) is False
    with store.transaction() as conn:
        conn.execute("INSERT INTO agent_comments (repo, comment_id, posted_at)"
                     " VALUES ('o/r', 77, ?)", (to_db_time(T0),))
        assert ours(77) is True
    assert ours(77) is True
    assert ours(78) is False
