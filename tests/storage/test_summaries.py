"""``pr_summaries``: each pull request's summary comment, asked for, leased, written; and
the facts it is written from."""

from __future__ import annotations

from datetime import timedelta

from service.storage import summaries
from service.storage.database import Database
from tests.queue_helpers import T0

LATER = T0 + timedelta(minutes=1)


def test_a_request_is_leased_written_and_released(database: Database) -> None:
    with database.transaction() as tx:
        summaries.request(tx, "o/r", 1, T0)
        assert summaries.pending(tx, T0, 10) == [("o/r", 1)]
        held = summaries.lease(tx, "o/r", 1, T0, LATER)
        assert held is not None and (held.comment_id, held.version, held.shown_version) == (
            None, 1, 0)
        assert summaries.lease(tx, "o/r", 1, T0, LATER) is None  # another holder waits
        assert summaries.pending(tx, T0, 10) == []  # leased: nobody else offered it
        summaries.creating(tx, "o/r", 1, T0)
        assert summaries.finish(tx, "o/r", 1, 777, held.version) is None
        assert summaries.pending(tx, T0, 10) == []


def test_a_request_during_the_write_keeps_the_lease_with_the_holder(
        database: Database) -> None:
    with database.transaction() as tx:
        summaries.request(tx, "o/r", 1, T0)
        held = summaries.lease(tx, "o/r", 1, T0, LATER)
        assert held is not None
        summaries.request(tx, "o/r", 1, T0)  # asked again while being written
        assert summaries.finish(tx, "o/r", 1, 777, held.version) == held.version + 1
        summaries.release(tx, "o/r", 1)
        assert summaries.pending(tx, T0, 10) == [("o/r", 1)]


def test_facts_count_settled_usage_apart_from_open_reservations(database: Database) -> None:
    rows = [("k1", 5_000, 24_800, True), ("k2", 5_000, 24_800, True),
            ("k3", 150_000, None, False)]
    with database.transaction() as tx:
        for key, reserved, used, settled in rows:
            tx.execute("INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens,"
                       " reserved_at, repo, pr_number, used_tokens, settled_at, stop_reason)"
                       " VALUES (?, 'w', 9, 'full', ?, ?, 'o/r', 1, ?, ?, ?)",
                       (key, reserved, "2026-11-02T09:00:00.000000Z", used,
                        "2026-11-02T09:01:00.000000Z" if settled else None,
                        "completed" if settled else None))
    with database.read() as tx:
        facts = summaries.facts(tx, "o/r", 1)
    assert (facts.tokens, facts.runs, facts.in_progress, facts.reserved) == (
        49_600, 2, 1, 150_000)
