"""The seam both ingest paths share: one decision, one effect, whichever path is first."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.intake.ingest import Applied, Decided, apply_decisions
from service.intake.rules.decisions import Close, Decision, Enqueue, Ignore
from service.storage.agent_comments import AgentComments
from service.storage.database import Database
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.kit.thorough import examples
from tests.queue_helpers import T0, apply_one, mention, opened


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def test_enqueue_then_the_same_event_again_is_a_duplicate(store: SqliteStore) -> None:
    queue = QueueDriver(store)
    with store.transaction() as conn:
        first = apply_one(conn, Enqueue(mention(1, 5)), now=T0)
    with store.transaction() as conn:
        second = apply_one(conn, Enqueue(mention(1, 5)), now=T0)
    assert first == Applied(enqueued=["mention:o/r:1:5"])
    assert second == Applied(duplicates=["mention:o/r:1:5"])
    assert len(queue.rows()) == 1


def test_close_cancels_pending_rows_and_records_the_closure(store: SqliteStore) -> None:
    queue = QueueDriver(store)
    queue.enqueue(opened(3), now=T0)
    queue.enqueue(mention(3, 8), now=T0)
    queue.enqueue(mention(4, 9), now=T0)
    with store.transaction() as conn:
        applied = apply_one(conn, Close("o/r", 3, merged=True), now=T0)
    assert sorted(applied.cancelled) == ["mention:o/r:3:8", "pr_opened:o/r:3:" + "a" * 40]
    with store.read() as conn:
        rows = conn.execute("SELECT repo, pr_number, merged, closed_at, purged_at"
                            " FROM closed_pull_requests").fetchall()
    assert [tuple(r) for r in rows] == [("o/r", 3, 1, to_db_time(T0), None)]
    assert queue.get("mention:o/r:4:9").status == "pending"  # type: ignore[union-attr]


def test_a_closure_that_rolls_back_cancels_nothing(store: SqliteStore) -> None:
    queue = QueueDriver(store)
    queue.enqueue(mention(3, 8), now=T0)

    def crash_before_commit() -> None:
        with store.transaction() as conn:
            apply_one(conn, Close("o/r", 3, merged=False), now=T0)
            raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError):
        crash_before_commit()
    assert queue.get("mention:o/r:3:8").status == "pending"  # type: ignore[union-attr]
    with store.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM closed_pull_requests").fetchone()[0] == 0


def test_ignore_records_its_reason(store: SqliteStore) -> None:
    with store.transaction() as conn:
        applied = apply_one(conn, Ignore("draft"), now=T0)
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


# -- several decisions at once: the same effect as one at a time -------------------------------

_JOBS = st.one_of(
    st.builds(lambda pr, sha: opened(pr, sha * 40), st.integers(1, 2), st.sampled_from("abc")),
    st.builds(mention, st.integers(1, 2), st.integers(1, 3)),
)
_DECISIONS = st.lists(st.one_of(
    st.builds(Enqueue, _JOBS),
    st.builds(lambda pr: Close("o/r", pr, merged=False), st.integers(1, 2)),
    st.just(Ignore("draft")),
), max_size=14)


class Model:
    """The queue's ingest rules, written out plainly: what each decision must do."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[str, int, str]] = {}  # key -> (kind, pr, status)

    def apply(self, decision: Decision) -> Applied:
        if isinstance(decision, Ignore):
            return Applied(ignored=decision.reason)
        if isinstance(decision, Close):
            cancelled = [k for k, (_, pr, status) in self.rows.items()
                         if pr == decision.pr_number and status == "pending"]
            for key in cancelled:
                kind, pr, _ = self.rows[key]
                self.rows[key] = (kind, pr, "cancelled")
            return Applied(cancelled=cancelled)
        assert isinstance(decision, Enqueue)
        job = decision.job
        key = job.dedupe_key
        known = self.rows.get(key)
        if known is not None and not (known[2] == "cancelled" and known[0] == "pr_opened"):
            return Applied(duplicates=[key])
        self.rows[key] = (job.kind, job.pr_number, "pending")
        if job.kind == "pr_opened":
            for other, (kind, pr, status) in self.rows.items():
                if (other != key and kind == "pr_opened" and pr == job.pr_number
                        and status == "pending"):
                    self.rows[other] = (kind, pr, "superseded")
        return Applied(enqueued=[key])


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(before=_DECISIONS, batch=_DECISIONS)
def test_a_batch_of_decisions_does_what_they_would_one_at_a_time(
        tmp_path_factory: pytest.TempPathFactory, before: list[Decision],
        batch: list[Decision]) -> None:
    model = Model()
    with new_sqlite_store(tmp_path_factory.mktemp("batch") / "state.db") as store:
        with store.transaction() as conn:  # what the queue held already
            apply_decisions(conn, [Decided(d, T0) for d in before])
        for decision in before:
            model.apply(decision)

        with store.transaction() as conn:
            applied = apply_decisions(conn, [Decided(d, T0) for d in batch])

        assert applied == [model.apply(decision) for decision in batch]
        with store.read() as conn:
            stored = {str(k): str(s) for k, s in conn.execute(
                "SELECT dedupe_key, status FROM queue")}
        assert stored == {key: status for key, (_, _, status) in model.rows.items()}
