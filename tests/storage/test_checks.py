"""``checks``: each trigger's check run as it should show and as GitHub was told; the
lifecycle (``completed`` is final) and the push lease."""

from __future__ import annotations

from datetime import timedelta

from service.storage import checks
from service.storage.checks import COMPLETED, IN_PROGRESS, QUEUED, CheckState, Target
from service.storage.database import Database
from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0, opened

TARGET = Target("pr_opened:o/r:1:" + "a" * 40, "a" * 40, "o/r", 1, "pr-review-agent")
WAITING = CheckState(QUEUED, "Queued", "waits")
WORKING = CheckState(IN_PROGRESS, "Reviewing", "works")
DONE = CheckState(COMPLETED, "Reviewed", "done", "success", "https://x/1")


def state(database: Database) -> tuple[CheckState, int, int]:
    with database.read() as tx:
        (row,) = checks.rows(tx, TARGET.dedupe_key)
    return row.state, row.version, row.shown_version


def test_a_row_moves_forward_and_a_completed_one_never_reopens(database: Database) -> None:
    with database.transaction() as tx:
        assert checks.show(tx, TARGET, WAITING, T0)
        assert not checks.show(tx, TARGET, WAITING, T0)  # unchanged: no new version
        assert checks.show(tx, TARGET, WORKING, T0)
        assert checks.show(tx, TARGET, DONE, T0)
        assert not checks.show(tx, TARGET, WAITING, T0)  # completed is final
        assert checks.show_open(tx, TARGET.dedupe_key, WAITING, T0) == 0
    assert state(database) == (DONE, 3, 0)


def test_show_if_new_opens_once_whatever_the_head(database: Database) -> None:
    other = Target(TARGET.dedupe_key, "b" * 40, "o/r", 1, "pr-review-agent")
    with database.transaction() as tx:
        assert checks.show_if_new(tx, TARGET, WAITING, T0)
        assert not checks.show_if_new(tx, other, WAITING, T0)


def test_owed_rows_are_leased_pushed_and_no_longer_owed(database: Database) -> None:
    with database.transaction() as tx:
        checks.show(tx, TARGET, WAITING, T0)
        (owed,) = checks.owed(tx, since=T0 - timedelta(hours=1), now=T0, limit=10)
        assert owed.target == TARGET
        leased = checks.lease(tx, TARGET, T0, T0 + timedelta(minutes=1))
        assert leased is not None and leased.version == 1
        assert checks.lease(tx, TARGET, T0, T0 + timedelta(minutes=1)) is None  # held
        checks.creating(tx, TARGET, T0)
        checks.pushed(tx, TARGET, 1, 4242)
        assert checks.owed(tx, since=T0 - timedelta(hours=1), now=T0, limit=10) == []
        (row,) = checks.rows(tx, TARGET.dedupe_key)
    assert (row.check_run_id, row.shown_version, row.create_started_at) == (4242, 1, T0)


def test_the_loops_queries_find_untracked_and_waiting_rows(database: Database) -> None:
    queue = QueueDriver(database)
    job = opened(1)
    assert queue.enqueue(job, now=T0)
    with database.read() as tx:
        (untracked,) = checks.untracked(tx, T0 - timedelta(hours=1), 10)
        assert checks.waiting(tx, 10) == []
    assert (untracked.dedupe_key, untracked.status, untracked.charged) == (
        job.dedupe_key, "pending", 0)
    target = Target(job.dedupe_key, job.head_sha or "", "o/r", 1, "pr-review-agent")
    with database.transaction() as tx:
        checks.show(tx, target, WAITING, T0)
    with database.read() as tx:
        assert checks.untracked(tx, T0 - timedelta(hours=1), 10) == []
        (waiting,) = checks.waiting(tx, 10)
    assert (waiting.dedupe_key, waiting.attempts, waiting.last_stop_reason) == (
        job.dedupe_key, 0, None)
