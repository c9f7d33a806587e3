"""The queue's table: its rows as stored and read, and its one lifecycle table."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from service.storage import queue as q
from service.storage import queue_enqueue, queue_lease
from service.storage.database import Database
from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0, both_backends_queue, both_backends_store, mention, opened

__all__ = ["both_backends_queue", "both_backends_store"]  # the fixtures, on both backends


def test_enqueue_stores_every_field(queue: QueueDriver) -> None:
    queue.enqueue(mention(3, 55, command="describe"), now=T0)
    queue.enqueue(opened(4, sha="b" * 40), now=T0)
    m = queue.get("mention:o/r:3:55")
    p = queue.get("pr_opened:o/r:4:" + "b" * 40)
    assert m is not None and p is not None
    assert (m.kind, m.command, m.comment_id, m.comment_source, m.head_sha) == (
        "mention", "describe", 55, "issue", None)
    assert (p.kind, p.command, p.comment_id, p.comment_source, p.head_sha) == (
        "pr_opened", "review", None, None, "b" * 40)


def test_every_status_in_the_sql_comes_from_the_lifecycle_table() -> None:
    statements = [v for module in (q, queue_enqueue, queue_lease)
                  for k, v in vars(module).items() if k.startswith("_") and isinstance(v, str)
                  and ("UPDATE queue" in v or "FROM queue" in v or "INSERT INTO queue" in v)]
    assert statements
    for sql in statements:
        for literal in re.findall(r"'([a-z_]+)'", sql):
            if literal in ("pr_opened", "mention"):
                continue
            assert literal in q.STATUSES, f"{literal!r} is not a lifecycle status"


def test_the_lifecycle_table_is_closed_and_terminal_states_are_final() -> None:
    for (event, src), dst in q.TRANSITIONS.items():
        assert src in q.STATUSES and dst in q.STATUSES
        if event not in q.OPERATOR_EVENTS:  # only an operator's retry leaves `abandoned`
            assert src not in q.TERMINAL, f"{event} leaves terminal state {src}"
        else:
            assert src in (q.ABANDONED, q.CANCELLED) and dst == q.PENDING
        assert q.target(event) == dst
    reachable = {q.PENDING} | set(q.TRANSITIONS.values())
    assert reachable == set(q.STATUSES)


def test_the_reads_list_count_and_refuse_an_unknown_status(
        store: Database, queue: QueueDriver) -> None:
    queue.enqueue(opened(1), now=T0)
    queue.enqueue(mention(2, 5), now=T0 + timedelta(seconds=1))
    assert queue.claim(now=T0 + timedelta(seconds=2), owner="w") is not None
    with store.read() as tx:
        assert q.counts(tx) == {**dict.fromkeys(q.STATUSES, 0), "pending": 1, "claimed": 1}
        assert [r.kind for r in q.rows(tx)] == ["pr_opened", "mention"]
        assert [r.kind for r in q.rows(tx, ["pending"])] == ["mention"]
        assert [r.kind for r in q.listing(tx, limit=1)] == ["mention"]  # newest first
        assert [r.kind for r in q.listing(tx, limit=1, oldest_first=True)] == ["pr_opened"]
        assert q.depth(tx) == [("claimed", "pr_opened", 1), ("pending", "mention", 1)]
    # A question counts as its own kind, beside the mention it also is.
    queue.enqueue(mention(3, 6, command="ask"), now=T0 + timedelta(seconds=3))
    with store.read() as tx:
        assert q.depth(tx) == [("claimed", "pr_opened", 1), ("pending", "ask", 1),
                               ("pending", "mention", 1)]
    with store.read() as tx:
        assert q.known_heads(tx, "o/r", 1) == {"a" * 40}
        assert q.row(tx, "nope") is None
        with pytest.raises(ValueError, match="unknown status"):
            q.rows(tx, ["pendng"])
        with pytest.raises(ValueError, match="unknown status"):
            q.listing(tx, statuses=["pendng"])
