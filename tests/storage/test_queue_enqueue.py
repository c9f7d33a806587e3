"""What is added to the queue: idempotent enqueues, newer heads superseding older ones,
a closed pull request's pending rows cancelled and revived when it reopens."""

from __future__ import annotations

from datetime import timedelta

from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0, both_backends_queue, both_backends_store, mention, opened

__all__ = ["both_backends_queue", "both_backends_store"]  # the fixtures, on both backends


def test_enqueue_is_idempotent_and_reports_new(queue: QueueDriver) -> None:
    assert queue.enqueue(mention(1, 100), now=T0) is True
    assert queue.enqueue(mention(1, 100), now=T0 + timedelta(seconds=5)) is False
    rows = queue.rows()
    assert len(rows) == 1
    assert rows[0].enqueued_at == T0  # the second enqueue changed nothing
    assert rows[0].status == "pending" and rows[0].attempts == 0


def test_newer_pr_opened_supersedes_older_pending(queue: QueueDriver) -> None:
    queue.enqueue(opened(1, sha="1" * 40), now=T0)
    queue.enqueue(opened(2, sha="1" * 40), now=T0)  # another pull request: untouched
    queue.enqueue(mention(1, 9), now=T0)  # a mention is not a head: untouched
    assert queue.enqueue(opened(1, sha="2" * 40), now=T0 + timedelta(seconds=1))
    status = {r.dedupe_key: r.status for r in queue.rows()}
    assert status == {
        "pr_opened:o/r:1:" + "1" * 40: "superseded",
        "pr_opened:o/r:2:" + "1" * 40: "pending",
        "mention:o/r:1:9": "pending",
        "pr_opened:o/r:1:" + "2" * 40: "pending",
    }
    # A duplicate of the superseded head does not resurrect it or supersede the newer.
    assert queue.enqueue(opened(1, sha="1" * 40), now=T0 + timedelta(seconds=2)) is False
    assert queue.get("pr_opened:o/r:1:" + "2" * 40).status == "pending"  # type: ignore[union-attr]


def test_a_claimed_older_head_is_not_superseded(queue: QueueDriver) -> None:
    queue.enqueue(opened(1, sha="1" * 40), now=T0)
    c = queue.claim(now=T0, owner="w")
    assert c is not None
    queue.enqueue(opened(1, sha="2" * 40), now=T0)
    assert queue.get(c.dedupe_key).status == "claimed"  # type: ignore[union-attr]


def test_cancel_pull_request_cancels_only_pending(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(1, 2), now=T0 + timedelta(seconds=1))
    queue.enqueue(mention(2, 3), now=T0)
    c = queue.claim(now=T0, owner="w")
    assert c is not None and c.dedupe_key == "mention:o/r:1:1"
    assert queue.cancel_pull_request("o/r", 1) == ["mention:o/r:1:2"]
    status = {r.dedupe_key: r.status for r in queue.rows()}
    assert status == {"mention:o/r:1:1": "claimed", "mention:o/r:1:2": "cancelled",
                      "mention:o/r:2:3": "pending"}


def test_a_reopened_pull_request_revives_its_cancelled_head(queue: QueueDriver) -> None:
    queue.enqueue(opened(1), now=T0)
    queue.enqueue(mention(1, 4), now=T0)
    assert len(queue.cancel_pull_request("o/r", 1)) == 2
    later = T0 + timedelta(hours=1)
    # Reopened at the same head: the same dedupe key, which must not be a dead duplicate.
    assert queue.enqueue(opened(1), now=later) is True
    row = queue.get("pr_opened:o/r:1:" + "a" * 40)
    assert row is not None and row.status == "pending" and row.enqueued_at == later
    # A mention is not revived by a repeat of the same comment: nobody asked again.
    assert queue.enqueue(mention(1, 4), now=later) is False
    assert queue.get("mention:o/r:1:4").status == "cancelled"  # type: ignore[union-attr]
    # A finished head is never revived.
    c = queue.claim(now=later, owner="w")
    assert c is not None and queue.finish(c.dedupe_key, "w")
    assert queue.enqueue(opened(1), now=later) is False
    assert queue.get(c.dedupe_key).status == "done"  # type: ignore[union-attr]
