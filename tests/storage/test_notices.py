"""``notices``: at most one notice per mention, claimed before it is posted."""

from __future__ import annotations

from datetime import timedelta

from service.storage import notices
from service.storage.database import Database
from service.storage.queue import ABANDONED
from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0, mention, opened


def test_pending_mentions_are_offered_until_a_notice_is_claimed(database: Database) -> None:
    queue = QueueDriver(database)
    first, second = mention(1, 101), mention(2, 102)
    for job in (first, second, opened(3)):
        assert queue.enqueue(job, now=T0)
    with database.read() as tx:
        found = notices.pending_mentions(tx, 10)
    assert [c.dedupe_key for c in found] == [first.dedupe_key, second.dedupe_key]
    assert (found[0].repo, found[0].pr_number, found[0].comment_id) == ("o/r", 1, 101)
    with database.transaction() as tx:
        assert notices.claim(tx, first.dedupe_key, "deferred", T0)
        assert not notices.claim(tx, first.dedupe_key, "deferred", T0)  # one notice only
    with database.read() as tx:
        assert [c.dedupe_key for c in notices.pending_mentions(tx, 10)] == [second.dedupe_key]


def test_a_claim_is_given_back_only_until_its_notice_is_posted(database: Database) -> None:
    with database.transaction() as tx:
        assert notices.claim(tx, "k1", "deferred", T0)
        assert notices.unclaim(tx, "k1")
        assert notices.claim(tx, "k1", "deferred", T0)
        notices.posted(tx, "k1", 555, T0)
        assert not notices.unclaim(tx, "k1")
        assert not notices.claim(tx, "k1", "deferred", T0)


def test_abandoned_mentions_carry_their_last_stop_reason(database: Database) -> None:
    queue = QueueDriver(database)
    job = mention(4, 104)
    assert queue.enqueue(job, now=T0)
    with database.transaction() as tx:
        tx.execute("UPDATE queue SET status = ? WHERE dedupe_key = ?",
                   (ABANDONED, job.dedupe_key))
        tx.execute("INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                   " reserved_at, repo, pr_number, used_tokens, settled_at, stop_reason)"
                   " VALUES (?, 'w', 9, 'full', 10, ?, 'o/r', 4, 0, ?, 'engine_unavailable')",
                   (job.dedupe_key, "2026-11-02T09:00:00.000000Z",
                    "2026-11-02T09:00:01.000000Z"))
    with database.read() as tx:
        (found,) = notices.abandoned_mentions(tx, T0 - timedelta(hours=1), 10)
        assert notices.abandoned_mentions(tx, T0 + timedelta(hours=1), 10) == []
    assert (found.dedupe_key, found.stop_reason) == (job.dedupe_key, "engine_unavailable")
