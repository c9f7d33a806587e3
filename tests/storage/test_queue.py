"""The queue's contract: idempotent enqueue, FIFO claims with leases, guarded finish."""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from service.storage import queue as q
from service.storage.database import Database, Transaction
from service.storage.queue import Claim, ReviewQueue
from service.storage.sqlite import SqliteStore
from tests.queue_helpers import LEASE, T0, mention, opened


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


@pytest.fixture
def queue(store: SqliteStore) -> ReviewQueue:
    return ReviewQueue(store, lease=LEASE)


def test_enqueue_is_idempotent_and_reports_new(queue: ReviewQueue) -> None:
    assert queue.enqueue(mention(1, 100), now=T0) is True
    assert queue.enqueue(mention(1, 100), now=T0 + timedelta(seconds=5)) is False
    rows = queue.rows()
    assert len(rows) == 1
    assert rows[0].enqueued_at == T0  # the second enqueue changed nothing
    assert rows[0].status == "pending" and rows[0].attempts == 0


def test_enqueue_stores_every_field(queue: ReviewQueue) -> None:
    queue.enqueue(mention(3, 55, command="describe"), now=T0)
    queue.enqueue(opened(4, sha="b" * 40), now=T0)
    m = queue.get("mention:o/r:3:55")
    p = queue.get("pr_opened:o/r:4:" + "b" * 40)
    assert m is not None and p is not None
    assert (m.kind, m.command, m.comment_id, m.comment_source, m.head_sha) == (
        "mention", "describe", 55, "issue", None)
    assert (p.kind, p.command, p.comment_id, p.comment_source, p.head_sha) == (
        "pr_opened", "review", None, None, "b" * 40)


def test_claim_is_fifo_and_leases(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(2, 2), now=T0 + timedelta(seconds=1))
    c = queue.claim(now=T0 + timedelta(seconds=2), owner="h:1:0")
    assert c is not None and c.dedupe_key == "mention:o/r:1:1"
    assert c.attempts == 1 and c.owner == "h:1:0"
    assert c.leased_until == T0 + timedelta(seconds=2) + LEASE
    row = queue.get(c.dedupe_key)
    assert row is not None and row.status == "claimed" and row.owner == "h:1:0"
    c2 = queue.claim(now=T0 + timedelta(seconds=3), owner="h:1:1")
    assert c2 is not None and c2.dedupe_key == "mention:o/r:2:2"
    assert queue.claim(now=T0 + timedelta(seconds=4), owner="h:1:2") is None


def test_a_pull_request_with_a_live_lease_is_skipped(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(1, 2), now=T0 + timedelta(seconds=1))
    queue.enqueue(mention(2, 3), now=T0 + timedelta(seconds=2))
    first = queue.claim(now=T0, owner="a")
    second = queue.claim(now=T0, owner="b")
    assert first is not None and second is not None
    assert (first.pr_number, second.pr_number) == (1, 2)
    assert queue.claim(now=T0, owner="c") is None
    assert queue.finish(first.dedupe_key, "a")
    third = queue.claim(now=T0, owner="c")
    assert third is not None and third.dedupe_key == "mention:o/r:1:2"


def test_an_expired_lease_is_reclaimed_with_attempts_counting(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    c1 = queue.claim(now=T0, owner="dead")
    assert c1 is not None
    assert queue.claim(now=T0 + LEASE - timedelta(seconds=1), owner="b") is None
    c2 = queue.claim(now=T0 + LEASE, owner="b")
    assert c2 is not None and c2.dedupe_key == c1.dedupe_key and c2.attempts == 2
    # The dead worker's late finish changes nothing: the row is b's now.
    assert queue.finish(c1.dedupe_key, "dead") is False
    assert queue.release(c1.dedupe_key, "dead") is False
    row = queue.get(c1.dedupe_key)
    assert row is not None and row.status == "claimed" and row.owner == "b"
    assert queue.finish(c1.dedupe_key, "b") is True
    row = queue.get(c1.dedupe_key)
    assert row is not None and row.status == "done"


def test_rows_out_of_attempts_are_abandoned_not_claimed(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    now = T0
    for attempt in range(1, q.MAX_ATTEMPTS + 1):
        c = queue.claim(now=now, owner=f"w{attempt}")
        assert c is not None and c.attempts == attempt
        now += LEASE  # each attempt dies holding its lease
    # The last attempt's lease is live until now; a claim before then abandons nothing.
    assert queue.claim(now=now - timedelta(seconds=1), owner="x") is None
    assert queue.get("mention:o/r:1:1").status == "claimed"  # type: ignore[union-attr]
    assert queue.claim(now=now, owner="x") is None
    row = queue.get("mention:o/r:1:1")
    assert row is not None and row.status == "abandoned" and row.attempts == q.MAX_ATTEMPTS


def test_a_released_row_at_max_attempts_is_abandoned(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    for _ in range(q.MAX_ATTEMPTS):
        c = queue.claim(now=T0, owner="w")
        assert c is not None
        assert queue.release(c.dedupe_key, "w")
    assert queue.claim(now=T0, owner="w") is None
    assert queue.counts()["abandoned"] == 1


def test_refused_candidate_is_left_exactly_as_it_was(queue: ReviewQueue) -> None:
    queue.enqueue(opened(1), now=T0)
    queue.enqueue(mention(2, 5), now=T0 + timedelta(seconds=1))
    before = queue.get("pr_opened:o/r:1:" + "a" * 40)
    seen: list[str] = []

    def only_mentions(conn: sqlite3.Connection, claim: Claim, now: datetime) -> bool:
        seen.append(claim.dedupe_key)
        return claim.kind == "mention"

    c = queue.claim(now=T0 + timedelta(seconds=2), owner="w", admit=only_mentions)
    # No LIMIT 1 before the hook: the refused head did not block the mention behind it.
    assert c is not None and c.kind == "mention"
    assert seen == ["pr_opened:o/r:1:" + "a" * 40, "mention:o/r:2:5"]
    assert queue.get("pr_opened:o/r:1:" + "a" * 40) == before


def test_the_walk_reaches_a_candidate_behind_many_refused_ones(queue: ReviewQueue) -> None:
    # More refused rows than a page of the walk on a server, several sharing one instant:
    # the walk still offers every row once, in FIFO order, and finds the mention at the end.
    jobs = [(opened(n), T0 + timedelta(seconds=n // 3)) for n in range(1, 80)]
    queue.enqueue_many([*jobs, (mention(500, 9), T0 + timedelta(minutes=5))])
    seen: list[str] = []

    def only_mentions(conn: object, claim: Claim, now: datetime) -> bool:
        seen.append(claim.dedupe_key)
        return claim.kind == "mention"

    c = queue.claim(now=T0 + timedelta(minutes=6), owner="w", admit=only_mentions)
    assert c is not None and c.dedupe_key == "mention:o/r:500:9"
    expected = sorted(jobs, key=lambda j: (j[1], f"pr_opened:o/r:{j[0].pr_number}:"))
    assert seen == [f"pr_opened:o/r:{job.pr_number}:{'a' * 40}" for job, _ in expected] + [
        "mention:o/r:500:9"]


def test_admit_hook_writes_commit_with_the_lease(store: SqliteStore, queue: ReviewQueue) -> None:
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


def test_newer_pr_opened_supersedes_older_pending(queue: ReviewQueue) -> None:
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


def test_a_claimed_older_head_is_not_superseded(queue: ReviewQueue) -> None:
    queue.enqueue(opened(1, sha="1" * 40), now=T0)
    c = queue.claim(now=T0, owner="w")
    assert c is not None
    queue.enqueue(opened(1, sha="2" * 40), now=T0)
    assert queue.get(c.dedupe_key).status == "claimed"  # type: ignore[union-attr]


def test_cancel_pull_request_cancels_only_pending(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    queue.enqueue(mention(1, 2), now=T0 + timedelta(seconds=1))
    queue.enqueue(mention(2, 3), now=T0)
    c = queue.claim(now=T0, owner="w")
    assert c is not None and c.dedupe_key == "mention:o/r:1:1"
    assert queue.cancel_pull_request("o/r", 1) == ["mention:o/r:1:2"]
    status = {r.dedupe_key: r.status for r in queue.rows()}
    assert status == {"mention:o/r:1:1": "claimed", "mention:o/r:1:2": "cancelled",
                      "mention:o/r:2:3": "pending"}


def test_renew_extends_only_a_held_lease(queue: ReviewQueue) -> None:
    queue.enqueue(mention(1, 1), now=T0)
    c = queue.claim(now=T0, owner="w")
    assert c is not None
    assert queue.renew(c.dedupe_key, "w", now=T0 + timedelta(minutes=15))
    assert queue.claim(now=T0 + LEASE, owner="x") is None  # renewed: still leased
    assert queue.renew(c.dedupe_key, "x", now=T0) is False


def test_claim_requires_an_owner(queue: ReviewQueue) -> None:
    with pytest.raises(ValueError):
        queue.claim(now=T0, owner="")


# -- the lifecycle table is the one source of the SQL ------------------------------------

def test_every_status_in_the_sql_comes_from_the_lifecycle_table() -> None:
    statements = [v for k, v in vars(q).items() if k.startswith("_") and isinstance(v, str)
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


def test_a_reopened_pull_request_revives_its_cancelled_head(queue: ReviewQueue) -> None:
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


def test_a_claim_given_the_clock_reads_it_inside_its_transaction(
        store: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers pass the clock itself: a claim that waited for its connection or the
    write lock is stamped when it is made, so its reservation is never dated before a
    budget policy published while it waited (and was admitted under)."""
    queue = ReviewQueue(store, lease=LEASE)
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
