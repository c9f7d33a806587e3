"""The poller against the simulated GitHub: what it enqueues, and what it must not.

Every test runs a real ``Poller`` through a real ``GitHubClient`` into the simulator, with
a real SQLite store; webhooks are emitted by the simulated world and never delivered
unless a test delivers them, so the poller alone has to reach what they would have.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import psycopg
import pytest

from service.config.schema import TriggersConfig
from service.intake.poller.cycle import RepositoryPoller
from service.intake.rules.classify import classify_event
from service.storage import repositories
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from service.storage.watermarks import Watermarks
from tests.poller_rig import (
    REPO,
    T0,
    PollerRig,
    poller_rig,  # noqa: F401 - the `rig` fixture
    sha,
)
from tests.queue_helpers import apply_one
from tests.simulator.harness import APP_ID


def opened_key(number: int, head: str | None = None) -> str:
    return f"pr_opened:{REPO}:{number}:{head or sha(number)}"


def mention_key(number: int, comment_id: int) -> str:
    return f"mention:{REPO}:{number}:{comment_id}"


async def seed(rig: PollerRig) -> None:
    """A repository with one pull request, polled once (cold start), then a second later."""
    rig.open_pull(1)
    rig.tick()
    report = await rig.poll()
    assert report.success
    assert rig.rows() == []
    rig.tick()


def finish(rig: PollerRig, key: str) -> None:
    """Pretend a worker reviewed the row."""
    claim = rig.queue.claim(now=rig.now(), owner="worker-1")
    assert claim is not None
    assert claim.dedupe_key == key
    assert rig.queue.finish(key, "worker-1")


# -- cold start -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_cold_start_on_200_open_pull_requests_enqueues_nothing(rig: PollerRig) -> None:
    for n in range(1, 201):
        rig.open_pull(n, draft=n % 10 == 0)
        if n % 40 == 0:
            rig.tick()
    rig.comment(7, "@claude review")  # an old request, from before the install
    newest = rig.now()
    report = await rig.poll()
    assert report.success
    assert report.enqueued == []
    assert rig.rows() == []
    assert rig.watermark("pull_requests") == newest
    assert rig.watermark("comments") == newest
    assert sorted(report.repositories[0].seeded) == ["comments", "pull_requests"]
    # One page of pull requests, the newest comment of each kind, and one conditional
    # listing per comment endpoint from the new mark: the backlog is never walked.
    assert len(rig.repo_requests()) == 5
    rig.tick()
    report = await rig.poll()
    assert report.success
    assert rig.rows() == []


@pytest.mark.anyio
async def test_an_empty_repository_is_seeded_so_its_first_pull_request_is_reviewed(
        rig: PollerRig) -> None:
    await rig.poll()
    assert rig.watermark("pull_requests") == datetime(1970, 1, 1, tzinfo=T0.tzinfo)
    rig.tick()
    rig.open_pull(1)
    rig.tick()
    await rig.poll()
    assert rig.keys() == [opened_key(1)]


@pytest.mark.anyio
async def test_activity_on_a_pull_request_older_than_the_install_does_not_review_it(
        rig: PollerRig) -> None:
    for n in range(1, 151):  # 1..50 are beyond the first page the seed reads
        rig.open_pull(n)
    rig.tick()
    await rig.poll()
    rig.tick()
    rig.comment(1, "looks fine")         # never seen by this poller
    rig.comment(150, "needs a rebase")   # seen on the seed's page
    rig.world.edit_pull(REPO, 2, title="Renamed")
    rig.push(3, sha(1003))               # a push: on_push is off
    rig.tick()
    report = await rig.poll()
    assert report.success
    assert rig.rows() == []


@pytest.mark.anyio
@pytest.mark.parametrize("floor_minutes", [None, 30, 90])
async def test_a_first_poll_decides_what_changed_since_the_repository_was_installed(
        rig: PollerRig, floor_minutes: int | None) -> None:
    """A repository installed an hour ago and first polled now (its turn in a long first
    sweep): what predates the install is backlog; what came after is decided, back to
    the floor a first poll may look (the planner's: twice the sweep) and no further."""
    rig.open_pull(1)                            # backlog
    rig.comment(1, "@claude review")            # backlog
    installed = rig.tick(60)
    with rig.store.transaction() as tx:
        repositories.add(tx, REPO, rig.installation.id, installed)
    rig.tick(30 * 60)
    rig.open_pull(2)                            # half an hour after the install
    late = rig.comment(1, "@claude review")
    changed = rig.now()
    rig.tick(30 * 60)
    now = rig.now()
    streams = RepositoryPoller(rig.client, rig.store, rig.ctx)
    floor = None if floor_minutes is None else now - timedelta(minutes=floor_minutes)
    report = await streams.poll(REPO, rig.installation.id, now, seed_floor=floor)
    assert sorted(report.seeded) == ["comments", "pull_requests"]
    if floor_minutes == 90:   # the install is within the floor: all since it is decided
        assert rig.keys() == sorted([f"mention:{REPO}:1:{late.id}", opened_key(2)])
        assert rig.watermark("pull_requests") == changed
    else:                     # no floor, or one after both: a cold start
        assert rig.keys() == []
        assert rig.watermark("pull_requests") == changed
    rig.tick()
    await streams.poll(REPO, rig.installation.id, rig.now(), seed_floor=floor)
    assert len(rig.rows()) == (2 if floor_minutes == 90 else 0)  # nothing twice


# -- pull requests ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_new_pull_request_after_seeding_is_one_row(rig: PollerRig) -> None:
    await seed(rig)
    pr = rig.open_pull(2)  # the opened webhook is emitted and never delivered
    assert rig.world.events[-1].event == "pull_request"
    rig.tick()
    report = await rig.poll()
    assert report.enqueued == [opened_key(2)]
    (row,) = rig.rows()
    assert (row.kind, row.pr_number, row.head_sha) == ("pr_opened", 2, sha(2))
    assert row.actor_id == pr.issue.user.id
    rig.tick()
    await rig.poll()
    assert rig.keys() == [opened_key(2)]


@pytest.mark.anyio
async def test_a_draft_is_reviewed_once_it_is_marked_ready(rig: PollerRig) -> None:
    await seed(rig)
    rig.open_pull(2, draft=True)
    rig.tick()
    await rig.poll()
    assert rig.rows() == []
    rig.tick()
    rig.world.set_draft(REPO, 2, False)
    rig.tick()
    await rig.poll()
    assert rig.keys() == [opened_key(2)]


@pytest.mark.anyio
async def test_a_draft_from_before_the_install_is_reviewed_when_marked_ready(
        rig: PollerRig) -> None:
    rig.open_pull(1, draft=True)
    rig.open_pull(2)
    rig.tick()
    await rig.poll()
    rig.tick()
    rig.world.set_draft(REPO, 1, False)
    rig.tick()
    await rig.poll()
    assert rig.keys() == [opened_key(1)]


@pytest.mark.anyio
async def test_a_missed_reopen_is_caught_and_reviews_the_new_head(rig: PollerRig) -> None:
    await seed(rig)
    rig.open_pull(2)
    rig.tick()
    await rig.poll()
    finish(rig, opened_key(2))
    rig.tick()
    rig.world.close(REPO, 2)
    rig.tick()
    await rig.poll()
    rig.tick()
    rig.push(2, sha(202))
    rig.world.reopen(REPO, 2)
    rig.tick()
    report = await rig.poll()
    assert report.enqueued == [opened_key(2, sha(202))]


@pytest.mark.anyio
async def test_a_reopen_is_caught_after_a_restart_from_the_recorded_closure(
        rig: PollerRig) -> None:
    await seed(rig)
    rig.open_pull(2)
    rig.tick()
    await rig.poll()
    finish(rig, opened_key(2))
    rig.tick()
    rig.world.close(REPO, 2)
    rig.tick()
    await rig.poll()
    await rig.restart()  # memory gone; the closure is in the store
    rig.tick()
    rig.push(2, sha(202))
    rig.world.reopen(REPO, 2)
    rig.tick()
    await rig.poll()
    assert rig.keys() == sorted([opened_key(2), opened_key(2, sha(202))])


@pytest.mark.anyio
async def test_a_pull_request_closed_before_the_install_is_reviewed_when_reopened(
        rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.world.close(REPO, 1)
    rig.tick()
    await rig.poll()
    rig.tick()
    rig.world.reopen(REPO, 1)
    rig.tick()
    await rig.poll()
    assert rig.keys() == [opened_key(1)]


@pytest.mark.anyio
async def test_a_closed_pull_request_cancels_pending_rows_and_records_the_closure(
        rig: PollerRig) -> None:
    await seed(rig)
    rig.open_pull(2)
    comment = rig.comment(2, "@claude describe")
    rig.tick()
    await rig.poll()
    assert rig.keys() == sorted([opened_key(2), mention_key(2, comment.id)])
    rig.tick()
    rig.world.close(REPO, 2, merged=True)
    rig.tick()
    report = await rig.poll()
    assert sorted(report.repositories[0].cancelled) == rig.keys()
    assert {r.status for r in rig.rows()} == {"cancelled"}
    with rig.store.read() as conn:
        rows = conn.execute("SELECT repo, pr_number, merged, purged_at"
                            " FROM closed_pull_requests").fetchall()
    assert [tuple(r) for r in rows] == [(REPO, 2, 1, None)]
    # A comment on the closed pull request later does not record the closure again.
    rig.tick()
    rig.comment(2, "thanks")
    rig.tick()
    report = await rig.poll()
    assert report.repositories[0].cancelled == []


@pytest.mark.parametrize("on_push", [False, True])
@pytest.mark.anyio
async def test_a_push_to_a_reviewed_pull_request_is_reviewed_only_with_on_push(
        tmp_path: Path, on_push: bool) -> None:
    rig = PollerRig.create(tmp_path, triggers=TriggersConfig(on_push=on_push))
    try:
        await seed(rig)
        rig.open_pull(2)
        rig.tick()
        await rig.poll()
        finish(rig, opened_key(2))
        rig.tick()
        rig.comment(2, "one more thing")  # activity without a new head: nothing
        rig.tick()
        await rig.poll()
        assert rig.keys() == [opened_key(2)]
        rig.tick()
        rig.push(2, sha(202))
        rig.tick()
        await rig.poll()
        expected = [opened_key(2)] + ([opened_key(2, sha(202))] if on_push else [])
        assert rig.keys() == sorted(expected)
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_a_pull_request_by_a_bot_is_not_reviewed_unasked(rig: PollerRig) -> None:
    rig.world.add_user("dependabot[bot]", type="Bot")
    await seed(rig)
    rig.open_pull(2, user="dependabot[bot]")
    rig.tick()
    await rig.poll()
    assert rig.rows() == []


# -- comments ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_mention_that_no_webhook_delivered_is_enqueued(rig: PollerRig) -> None:
    await seed(rig)
    comment = rig.comment(1, "@claude review")
    assert rig.world.events[-1].event == "issue_comment"
    rig.tick()
    report = await rig.poll()
    assert report.enqueued == [mention_key(1, comment.id)]
    row = rig.queue.get(mention_key(1, comment.id))
    assert row is not None
    assert (row.kind, row.comment_id, row.comment_source, row.command) == (
        "mention", comment.id, "issue", "review")
    assert row.actor_id == rig.world.users["bob"].id


@pytest.mark.anyio
async def test_a_mention_in_a_diff_comment_is_enqueued_with_its_source(rig: PollerRig) -> None:
    await seed(rig)
    comment = rig.world.add_review_comment(REPO, 1, user="bob", body="@claude describe",
                                           path="src/app.py", line=3, emit=True)
    rig.tick()
    await rig.poll()
    row = rig.queue.get(mention_key(1, comment.id))
    assert row is not None
    assert (row.comment_source, row.command) == ("review", "describe")
    assert len(rig.rows()) == 1


@pytest.mark.anyio
async def test_an_edited_comment_never_triggers(rig: PollerRig) -> None:
    rig.open_pull(1)
    before = rig.comment(1, "written before the install")
    rig.tick()
    await rig.poll()
    rig.tick()
    after = rig.comment(1, "written after, no request yet")
    rig.tick()
    await rig.poll()
    rig.tick()
    rig.world.edit_issue_comment(before, "@claude review")
    rig.world.edit_issue_comment(after, "@claude review")
    rig.tick()
    report = await rig.poll()
    assert report.success
    assert rig.rows() == []


@pytest.mark.anyio
async def test_the_apps_own_comments_never_trigger(rig: PollerRig) -> None:
    await seed(rig)
    bot = rig.world.app.bot
    rig.world.add_issue_comment(REPO, 1, user=bot, body="@claude review", app_id=APP_ID)
    rig.world.add_issue_comment(REPO, 1, user="bob", body="@claude review", app_id=APP_ID)
    recorded = rig.comment(1, "@claude review")  # an id the publisher recorded as ours
    with rig.store.transaction() as conn:
        conn.execute("INSERT INTO agent_comments (repo, comment_id, posted_at)"
                     " VALUES (?, ?, ?)", (REPO, recorded.id, to_db_time(rig.now())))
    rig.world.add_user("renovate[bot]", type="Bot")
    rig.comment(1, "@claude review", user="renovate[bot]")
    rig.comment(1, "@claude review", user="eve")  # a person, but not allowed
    rig.tick()
    report = await rig.poll()
    assert report.success
    assert rig.rows() == []


@pytest.mark.anyio
async def test_a_comment_on_a_plain_issue_never_triggers(rig: PollerRig) -> None:
    await seed(rig)
    issue = rig.world.add_issue(REPO, title="A bug", user="eve")
    rig.comment(issue.number, "@claude review")
    rig.tick()
    report = await rig.poll()
    assert report.success
    assert rig.rows() == []


# -- the same second as the watermark, and restarts --------------------------------------------


@pytest.mark.anyio
async def test_items_in_the_watermarks_own_second_after_the_poll_are_not_missed(
        rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.comment(1, "before the install")
    await rig.poll()  # the clock does not move: the marks are this very second
    pr = rig.open_pull(2)
    comment = rig.comment(1, "@claude review")
    assert pr.issue.created_at == rig.watermark("pull_requests")
    await rig.poll()
    assert rig.keys() == sorted([opened_key(2), mention_key(1, comment.id)])
    await rig.poll()
    assert len(rig.rows()) == 2


@pytest.mark.anyio
async def test_a_restart_replays_nothing_at_the_watermark(rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.comment(1, "@claude review")  # before the install: never a request
    rig.tick()
    await rig.poll()
    await rig.restart()  # new token, so every listing is a full 200 again
    rig.tick()
    await rig.poll()
    assert rig.rows() == []
    assert all(r.status == 200 for r in rig.repo_requests()[-3:])


# -- webhook and poller racing ---------------------------------------------------------------


def deliver(rig: PollerRig, events: list[tuple[str, dict[str, object]]]) -> list[str]:
    """What the webhook receiver does with a delivery: classify and apply, one transaction."""
    enqueued: list[str] = []
    with rig.store.transaction() as conn:
        for event, payload in events:
            applied = apply_one(conn, classify_event(event, payload, rig.ctx),
                                     now=rig.now())
            enqueued.extend(applied.enqueued)
    return enqueued


@pytest.mark.parametrize("webhook_first", [True, False])
@pytest.mark.anyio
async def test_webhook_and_poller_on_one_event_make_one_row(
        rig: PollerRig, webhook_first: bool) -> None:
    await seed(rig)
    rig.open_pull(2)
    comment = rig.comment(2, "@claude review")
    events = [(e.event, e.payload) for e in rig.world.events[-2:]]
    rig.tick()
    if webhook_first:
        assert sorted(deliver(rig, events)) == sorted([opened_key(2), mention_key(2, comment.id)])
        report = await rig.poll()
        assert report.enqueued == []
        assert sorted(report.repositories[0].duplicates) == rig.keys()
    else:
        report = await rig.poll()
        assert len(report.enqueued) == 2
        assert deliver(rig, events) == []
    assert rig.keys() == sorted([opened_key(2), mention_key(2, comment.id)])


@pytest.mark.anyio
async def test_webhook_and_poller_at_the_same_moment_make_one_row(rig: PollerRig) -> None:
    await seed(rig)
    rig.open_pull(2)
    comment = rig.comment(2, "@claude review")
    events = [(e.event, e.payload) for e in rig.world.events[-2:]]
    rig.tick()
    webhook_rows: list[str] = []

    def webhook_thread() -> None:
        for _ in range(20):  # redelivered, over and over, while the poll runs
            webhook_rows.extend(deliver(rig, events))

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, webhook_thread)
        report = await rig.poll()
    assert sorted(webhook_rows + report.enqueued) == rig.keys()
    assert rig.keys() == sorted([opened_key(2), mention_key(2, comment.id)])


# -- crashes ---------------------------------------------------------------------------------


class CrashingStore(SqliteStore):
    """Dies once right before a watermark advance, after the apply transaction committed
    (``CrashingWatermarks`` reads ``crash_before``)."""

    crash_before: str | None = None


class CrashingWatermarks(Watermarks):
    def __init__(self, db: CrashingStore) -> None:
        super().__init__(db)
        self._crashing = db

    def advance(self, name: str, at: datetime) -> datetime:
        store = self._crashing
        if store.crash_before is not None and name.startswith(store.crash_before):
            store.crash_before = None
            raise RuntimeError("crashed between the enqueue and the watermark advance")
        return super().advance(name, at)


@pytest.mark.parametrize("stream", ["pull_requests", "comments"])
@pytest.mark.anyio
async def test_a_crash_between_enqueue_and_advance_loses_nothing_and_doubles_nothing(
        tmp_path: Path, stream: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("service.intake.poller.marks.Watermarks", CrashingWatermarks)
    store = CrashingStore(tmp_path / "state.db")
    rig = PollerRig.create(tmp_path, store=store)
    try:
        await seed(rig)
        rig.open_pull(2)
        comment = rig.comment(1, "@claude review")
        rig.tick()
        before = rig.watermark(stream)
        store.crash_before = stream
        with pytest.raises(RuntimeError, match="crashed"):
            await rig.poll()
        assert rig.cycles[-1][0] is False
        assert rig.watermark(stream) == before  # the mark did not move
        committed = rig.keys()
        assert committed  # the enqueue had committed
        # Nothing new happens on GitHub: the listings that were fetched are unchanged,
        # and a 304 must not hide the items whose mark never moved.
        rig.tick()
        report = await rig.poll()
        assert report.success
        assert rig.keys() == sorted([opened_key(2), mention_key(1, comment.id)])
        assert rig.watermark(stream) is not None
        assert rig.watermark(stream) > before  # type: ignore[operator]
        rig.tick()
        rig.open_pull(3)
        rig.tick()
        await rig.poll()
        assert rig.keys() == sorted([opened_key(2), opened_key(3),
                                     mention_key(1, comment.id)])
    finally:
        await rig.close()


class FlakyStore(SqliteStore):
    """The next write transaction made off the event loop's thread (the apply) fails
    with ``failure``: by default a busy store, as when another process holds the write
    lock past the busy timeout."""

    fail_next_apply = False
    failure: Exception = sqlite3.OperationalError("database is locked")

    @contextmanager
    def transaction(self, *, concurrent: bool = False) -> Iterator[sqlite3.Connection]:
        if self.fail_next_apply and threading.current_thread() is not threading.main_thread():
            self.fail_next_apply = False
            raise self.failure
        with super().transaction(concurrent=concurrent) as conn:
            yield conn


@pytest.mark.anyio
@pytest.mark.parametrize("failure", [
    sqlite3.OperationalError("database is locked"),
    # What psycopg raises when PostgreSQL restarts under an open connection.
    psycopg.OperationalError("server closed the connection unexpectedly")],
    ids=["busy", "unreachable"])
async def test_a_busy_or_unreachable_store_during_the_apply_does_not_let_a_304_hide_the_items(
        tmp_path: Path, failure: Exception) -> None:
    store = FlakyStore(tmp_path / "state.db")
    store.failure = failure
    rig = PollerRig.create(tmp_path, store=store)
    try:
        await seed(rig)
        rig.open_pull(2)
        rig.tick()
        store.fail_next_apply = True
        report = await rig.poll()
        assert report.skipped
        assert not report.success
        assert rig.rows() == []
        rig.tick()
        report = await rig.poll()  # the listing is unchanged since the failed cycle
        assert report.enqueued == [opened_key(2)]
    finally:
        await rig.close()


# -- conditional requests --------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_unchanged_repository_costs_only_304s_from_the_second_cycle(
        rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.comment(1, "hello")
    rig.tick()
    await rig.poll()
    first = len(rig.repo_requests())
    for _ in range(2):
        rig.tick(300)
        used_before = rig.rate_limit()
        report = await rig.poll()
        cycle = rig.repo_requests()[first:]
        first += len(cycle)
        assert [r.status for r in cycle] == [304, 304, 304]
        assert all(r.header("if-none-match") for r in cycle)
        assert (report.tally.requests, report.tally.not_modified) == (3, 3)
        assert rig.rate_limit() is not None and used_before is not None
        assert rig.rate_limit().remaining == used_before.remaining  # type: ignore[union-attr]
    assert rig.rows() == []
