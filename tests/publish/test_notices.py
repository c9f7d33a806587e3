"""Notices: one reply per trigger when the budget or the pre-flight refuses a mention —
naming the window and when it frees — however often the loop runs, across restarts and
GitHub faults; never for automatic reviews, never in a dry run."""

from __future__ import annotations

import pytest

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.publish.markers import notice_marker
from service.publish.notices import in_force, refusal_text, when
from tests.publisher_rig import (
    PHRASE,
    REPO,
    T0,
    Rig,
    budget,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)

ISSUE_COMMENTS = f"/repos/{REPO}/issues/*/comments"



# Session allowance 20,000 tokens, 10,000 reserved per run: two runs spend it.
RIG_BUDGET = budget(session=20_000, weekly=1_000_000, run=10_000)


def exhaust(rig: Rig) -> None:
    """Two automatic reviews of 10,000 tokens each fill the 5-hour window at T0."""
    for _ in range(2):
        rig.record(rig.opened(rig.add_pull()),
                   usage=Usage(tokens=10_000, confidence="exact", engine="e", model="m"))


def refuse(rig: Rig, governor: Governor | None = None) -> None:
    claimed = rig.queue.claim(now=rig.now(), owner="host:1:w1",
                              admit=(governor or rig.governor).admit)
    assert claimed is None


@pytest.mark.anyio
async def test_an_exhausted_window_gets_one_notice_naming_it_even_after_a_restart(
        rig: Rig) -> None:
    exhaust(rig)
    pr = rig.add_pull()
    job = rig.ask(pr)
    assert rig.queue.enqueue(job, now=rig.now())
    refuse(rig)
    assert rig.governor.last_refusal is not None
    assert rig.governor.last_refusal.reason == "exhausted"
    publisher = rig.publisher()

    assert await publisher.notify_refusals(rig.governor, rig.now()) == 1
    for _ in range(5):
        assert await publisher.notify_refusals(rig.governor, rig.now()) == 0

    (comment,) = rig.comments(pr)
    assert comment.body.splitlines()[0] == notice_marker(job.dedupe_key)
    assert "@bob" in comment.body and "5-hour session token allowance" in comment.body
    assert "2026-11-02 14:00 UTC" in comment.body and "in about 5 hours" in comment.body
    assert "stays queued" in comment.body
    notice = rig.row("notices", "dedupe_key = ?", job.dedupe_key)
    assert notice["comment_id"] == comment.id and notice["kind"] == "budget:exhausted"
    assert comment.id in rig.agent_comment_ids()

    # A restart: a new governor (it remembers no refusals) and a new publisher.
    governor = Governor(rig.store, rig.governor.config, clock=rig.world.clock.now)
    restarted = rig.publisher()
    assert await restarted.notify_refusals(governor, rig.now()) == 0
    refuse(rig, governor)
    assert await restarted.notify_refusals(governor, rig.now()) == 0
    assert len(rig.comments(pr)) == 1


@pytest.mark.anyio
async def test_a_refusal_for_everyone_reaches_every_waiting_mention_once(rig: Rig) -> None:
    exhaust(rig)
    prs = [rig.add_pull(), rig.add_pull()]
    for pr in prs:
        assert rig.queue.enqueue(rig.ask(pr), now=rig.now())
    assert rig.queue.enqueue(rig.opened(rig.add_pull()), now=rig.now())
    refuse(rig)  # the claim stops at the first candidate; the reason holds for all
    assert len(rig.governor.refusals) == 1
    publisher = rig.publisher()
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 2
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 0
    assert [len(rig.comments(pr)) for pr in prs] == [1, 1]
    assert len(rig.rows("notices")) == 2  # nothing for the automatic review


@pytest.mark.anyio
async def test_a_question_refused_for_budget_gets_one_notice_and_runs_when_it_frees(
        rig: Rig) -> None:
    exhaust(rig)
    pr = rig.add_pull()
    job = rig.ask(pr, command="ask")
    assert rig.queue.enqueue(job, now=rig.now())
    governor = Governor(rig.store, rig.governor.config, clock=rig.world.clock.now,
                        ask_run_tokens=3_000)
    refuse(rig, governor)
    publisher = rig.publisher()
    assert await publisher.notify_refusals(governor, rig.now()) == 1
    assert await publisher.notify_refusals(governor, rig.now()) == 0
    (comment,) = rig.comments(pr)
    assert "the answer for [your request]" in comment.body and "has not started" in comment.body
    assert "stays queued and runs then" in comment.body
    # The window frees: the question is admitted on the mention rung, reserving an
    # answer's share (ask.max_run_tokens), not a whole review's.
    rig.advance(hours=5, seconds=1)
    claim = rig.queue.claim(now=rig.now(), owner="host:1:w1", admit=governor.admit)
    assert claim is not None and claim.dedupe_key == job.dedupe_key
    reserved = rig.row("ledger", "dedupe_key = ? AND settled_at IS NULL", job.dedupe_key)
    assert reserved["reserved_tokens"] == 3_000 and reserved["actor_id"] == job.actor_id
    assert await publisher.notify_refusals(governor, rig.now()) == 0
    assert len(rig.comments(pr)) == 1


@pytest.mark.anyio
async def test_no_notice_once_the_window_has_freed(rig: Rig) -> None:
    exhaust(rig)
    pr = rig.add_pull()
    assert rig.queue.enqueue(rig.ask(pr), now=rig.now())
    refuse(rig)
    rig.advance(hours=5, seconds=1)
    assert await rig.publisher().notify_refusals(rig.governor, rig.now()) == 0
    assert rig.comments(pr) == [] and rig.rows("notices") == []


@pytest.mark.anyio
async def test_a_refused_pre_flight_gets_one_notice_and_an_automatic_review_none(
        rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.ask(pr, command="describe")
    rig.settle_refused(job)
    rig.settle_refused(rig.opened(rig.add_pull()))
    publisher = rig.publisher()
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 1
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 0
    (comment,) = rig.comments(pr)
    assert "description" in comment.body and "too large for one run" in comment.body
    assert rig.row("notices", "1 = 1")["kind"] == "preflight"
    assert len(rig.world.issue_comments) == 2  # bob's request and the one notice

    # Refusals from long ago are not answered (a store upgraded to this version).
    old = rig.add_pull()
    rig.settle_refused(rig.ask(old))
    rig.advance(hours=25)
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 0


@pytest.mark.anyio
async def test_a_mention_every_attempt_of_which_failed_is_told_once_an_automatic_one_never(
        rig: Rig) -> None:
    pr = rig.add_pull()
    asked = rig.ask(pr)
    for job in (asked, rig.opened(pr)):
        claim = rig.claim(job)
        assert rig.governor.settle(claim, Usage(0, "exact", None, None), now=rig.now(),
                                   stop_reason="engine_unavailable")
        with rig.store.transaction() as tx:  # the queue gave up after the last attempt
            tx.execute("UPDATE queue SET status = 'abandoned', attempts = 3, owner = NULL"
                       " WHERE dedupe_key = ?", (job.dedupe_key,))
    publisher = rig.publisher()

    assert await publisher.notify_refusals(rig.governor, rig.now()) == 1
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 0
    (comment,) = rig.comments(pr)
    assert "every attempt failed (the last: the review engine could not be started)" \
        in comment.body
    assert rig.row("notices", "1 = 1")["kind"] == "abandoned"


@pytest.mark.anyio
async def test_no_notice_in_a_dry_run(rig: Rig) -> None:
    pr = rig.add_pull()
    rig.settle_refused(rig.ask(pr))
    rig.set_config(dry_run=True)
    publisher = rig.publisher()
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 0
    assert rig.rows("notices") == [] and rig.comments(pr) == []
    rig.set_config(dry_run=False)
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 1


@pytest.mark.anyio
async def test_github_faults_never_produce_a_second_notice(rig: Rig) -> None:
    lost, applied, locked = rig.add_pull(), rig.add_pull(), rig.add_pull()
    for pr in (lost, applied, locked):
        rig.settle_refused(rig.ask(pr))
    publisher = rig.publisher()
    # 1: the POST never reached GitHub; 2: GitHub made the comment but the answer was
    # lost; 3: GitHub refuses (a locked conversation).
    rig.world.faults.server_error(method="POST", path_glob=f"/repos/{REPO}/issues/1/comments",
                                  status=502)
    rig.world.faults.server_error(method="POST", path_glob=f"/repos/{REPO}/issues/2/comments",
                                  status=502, applied=True)
    rig.world.faults.add(method="POST", path_glob=f"/repos/{REPO}/issues/3/comments",
                         status=403, times=None, body={"message": "Conversation is locked"})
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 0
    assert [len(rig.comments(pr)) for pr in (lost, applied, locked)] == [0, 1, 0]

    assert await publisher.notify_refusals(rig.governor, rig.now()) == 1  # the lost one
    for _ in range(3):
        assert await publisher.notify_refusals(rig.governor, rig.now()) == 0
    assert [len(rig.comments(pr)) for pr in (lost, applied, locked)] == [1, 1, 0]
    by_pr = {r["dedupe_key"].split(":")[2]: r for r in rig.rows("notices")}
    assert by_pr["2"]["comment_id"] == rig.comments(applied)[0].id  # found by its marker
    assert by_pr["3"]["comment_id"] is None  # kept: not retried against a refusal


def test_notice_text_and_when() -> None:
    assert when(T0.replace(hour=9, minute=40), T0) == (
        "**2026-11-02 09:40 UTC** (in about 40 minutes)")
    assert "in about 3 days" in when(T0.replace(day=5), T0)


@pytest.mark.anyio
async def test_in_force_reads_a_fresh_snapshot(rig: Rig) -> None:
    exhaust(rig)
    assert rig.queue.enqueue(rig.ask(rig.add_pull()), now=rig.now())
    refuse(rig)
    refusal = rig.governor.last_refusal
    assert refusal is not None
    assert in_force(refusal, rig.governor.snapshot(rig.now()), rig.now())
    rig.advance(hours=6)
    assert not in_force(refusal, rig.governor.snapshot(rig.now()), rig.now())
    text = refusal_text("mention:acme/widgets:1:5", refusal, None, command="review",
                        now=T0, phrase=PHRASE)
    assert text.startswith(notice_marker("mention:acme/widgets:1:5"))
    assert "the review for the request has not started" in text
