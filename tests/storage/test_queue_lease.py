"""The worker's side of the queue: FIFO claims with leases through the admit hook, and
the guarded moves on a lease."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from service.storage import queue as q
from service.storage.database import Database, Transaction
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from tests.kit.queue import QueueDriver
from tests.queue_helpers import LEASE, T0, both_backends_queue, both_backends_store, mention, opened

__all__ = ["both_backends_queue", "both_backends_store"]  # the fixtures, on both backends


def test_claim_is_fifo_and_leases(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(2, 2), now=T0 + timedelta(seconds=1))
    c = queue.claim(now=T0 + timedelta(seconds=2), owner="h:1:0")
    assert c is not None and c.dedupe_key == "mention:o/r:1:1"
    assert c.lease.attempt == 1 and c.lease.owner == "h:1:0"
    assert c.lease.until == T0 + timedelta(seconds=2) + LEASE
    row = queue.get(c.dedupe_key)
    assert row is not None and row.status == "claimed" and row.owner == "h:1:0"
    c2 = queue.claim(now=T0 + timedelta(seconds=3), owner="h:1:1")
    assert c2 is not None and c2.dedupe_key == "mention:o/r:2:2"
    assert queue.claim(now=T0 + timedelta(seconds=4), owner="h:1:2") is None


def test_a_pull_request_with_a_live_lease_is_skipped(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(1, 2), now=T0 + timedelta(seconds=1))
    queue.enqueue(mention(2, 3), now=T0 + timedelta(seconds=2))
    first = queue.claim(now=T0, owner="a")
    second = queue.claim(now=T0, owner="b")
    assert first is not None and second is not None
    assert (first.job.pr_number, second.job.pr_number) == (1, 2)
    assert queue.claim(now=T0, owner="c") is None
    assert queue.finish(first.dedupe_key, "a")
    third = queue.claim(now=T0, owner="c")
    assert third is not None and third.dedupe_key == "mention:o/r:1:2"


def test_an_expired_lease_is_reclaimed_with_attempts_counting(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    c1 = queue.claim(now=T0, owner="dead")
    assert c1 is not None
    assert queue.claim(now=T0 + LEASE - timedelta(seconds=1), owner="b") is None
    c2 = queue.claim(now=T0 + LEASE, owner="b")
    assert c2 is not None and c2.dedupe_key == c1.dedupe_key and c2.lease.attempt == 2
    # The dead worker's late finish changes nothing: the row is b's now.
    assert queue.finish(c1.dedupe_key, "dead") is False
    assert queue.release(c1.dedupe_key, "dead") is False
    row = queue.get(c1.dedupe_key)
    assert row is not None and row.status == "claimed" and row.owner == "b"
    assert queue.finish(c1.dedupe_key, "b") is True
    row = queue.get(c1.dedupe_key)
    assert row is not None and row.status == "done"


def test_rows_out_of_attempts_are_abandoned_not_claimed(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    now = T0
    for attempt in range(1, q.MAX_ATTEMPTS + 1):
        c = queue.claim(now=now, owner=f"w{attempt}")
        assert c is not None and c.lease.attempt == attempt
        now += LEASE  # each attempt dies holding its lease
    # The last attempt's lease is live until now; a claim before then abandons nothing.
    assert queue.claim(now=now - timedelta(seconds=1), owner="x") is None
    assert queue.get("mention:o/r:1:1").status == "claimed"  # type: ignore[union-attr]
    assert queue.claim(now=now, owner="x") is None
    row = queue.get("mention:o/r:1:1")
    assert row is not None and row.status == "abandoned" and row.attempts == q.MAX_ATTEMPTS


def test_a_released_row_at_max_attempts_is_abandoned(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    for _ in range(q.MAX_ATTEMPTS):
        c = queue.claim(now=T0, owner="w")
        assert c is not None
        assert queue.release(c.dedupe_key, "w")
    assert queue.claim(now=T0, owner="w") is None
    assert queue.counts()["abandoned"] == 1


def test_refused_candidate_is_left_exactly_as_it_was(queue: QueueDriver) -> None:
    queue.enqueue(opened(1), now=T0)
    queue.enqueue(mention(2, 5), now=T0 + timedelta(seconds=1))
    before = queue.get("pr_opened:o/r:1:" + "a" * 40)
    seen: list[str] = []

    def only_mentions(conn: sqlite3.Connection, claim: Claim, now: datetime) -> bool:
        seen.append(claim.dedupe_key)
        return claim.job.kind == "mention"

    c = queue.claim(now=T0 + timedelta(seconds=2), owner="w", admit=only_mentions)
    # No LIMIT 1 before the hook: the refused head did not block the mention behind it.
    assert c is not None and c.job.kind == "mention"
    assert seen == ["pr_opened:o/r:1:" + "a" * 40, "mention:o/r:2:5"]
    assert queue.get("pr_opened:o/r:1:" + "a" * 40) == before


def test_the_walk_reaches_a_candidate_behind_many_refused_ones(queue: QueueDriver) -> None:
    # More refused rows than a page of the walk on a server, several sharing one instant:
    # the walk still offers every row once, in FIFO order, and finds the mention at the end.
    jobs = [(opened(n), T0 + timedelta(seconds=n // 3)) for n in range(1, 80)]
    queue.enqueue_many([*jobs, (mention(500, 9), T0 + timedelta(minutes=5))])
    seen: list[str] = []

    def only_mentions(conn: object, claim: Claim, now: datetime) -> bool:
        seen.append(claim.dedupe_key)
        return claim.job.kind == "mention"

    c = queue.claim(now=T0 + timedelta(minutes=6), owner="w", admit=only_mentions)
    assert c is not None and c.dedupe_key == "mention:o/r:500:9"
    expected = sorted(jobs, key=lambda j: (j[1], f"pr_opened:o/r:{j[0].pr_number}:"))
    assert seen == [f"pr_opened:o/r:{job.pr_number}:{'a' * 40}" for job, _ in expected] + [
        "mention:o/r:500:9"]


def test_admit_hook_writes_commit_with_the_lease(store: SqliteStore, queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)

    def boom(conn: sqlite3.Connection, claim: Claim, now: datetime) -> bool:
        conn.execute("INSERT INTO budget_state (key, value) VALUES ('probe', 'x')")
        raise RuntimeError("hook failed")

    with pytest.raises(RuntimeError):
        queue.claim(now=T0, owner="w", admit=boom)
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM budget_state").fetchone()[0] == 0
    row = queue.get("mention:o/r:1:1")
    assert row is not None and row.status == "pending" and row.attempts == 0


def test_renew_extends_only_a_held_lease(queue: QueueDriver) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    c = queue.claim(now=T0, owner="w")
    assert c is not None
    assert queue.renew(c.dedupe_key, "w", now=T0 + timedelta(minutes=15))
    assert queue.claim(now=T0 + LEASE, owner="x") is None  # renewed: still leased
    assert queue.renew(c.dedupe_key, "x", now=T0) is False


def test_claim_requires_an_owner(queue: QueueDriver) -> None:
    with pytest.raises(ValueError):
        queue.claim(now=T0, owner="")


def test_a_claim_given_the_clock_reads_it_inside_its_transaction(
        store: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers pass the clock itself: a claim that waited for its connection or the
    write lock is stamped when it is made, so its reservation is never dated before a
    budget policy published while it waited (and was admitted under)."""
    queue = QueueDriver(store, lease=LEASE)
    queue.enqueue(mention(1, 100), now=T0)
    seen: list[str] = []
    transaction = store.transaction

    @contextlib.contextmanager
    def watched(*, concurrent: bool = False) -> Iterator[Transaction]:
        with transaction(concurrent=concurrent) as conn:
            seen.append("begun")
            yield conn

    monkeypatch.setattr(store, "transaction", watched)

    def clock() -> datetime:
        seen.append("clock read")
        return T0 + timedelta(seconds=30)

    admitted_at: list[datetime] = []

    def admit(conn: Transaction, claim: Claim, now: datetime) -> bool:
        admitted_at.append(now)
        return True

    claim = queue.claim(now=clock, owner="w1", admit=admit)
    assert claim is not None
    assert seen == ["begun", "clock read"]
    assert admitted_at == [T0 + timedelta(seconds=30)]
    assert claim.lease.until == T0 + timedelta(seconds=30) + LEASE
