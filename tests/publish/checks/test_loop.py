"""The check-run loop against the simulated GitHub, on both backends: every trigger gets
exactly one check run per head, it moves queued → in progress → completed, a wait says
what it waits for, a lost answer never makes a second one, and an installation without
``checks: write`` is told apart without stopping the review."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from service.budget.usage import Usage
from service.config.posting import ChecksConfig
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.run_content import Omitted
from service.storage import checks, queue_lease
from service.storage.queue import ABANDONED
from tests.kit.stores import new_sqlite_store
from tests.publisher_rig import (
    ANCHORED,
    APP_ID,
    HEAD,
    NEW_HEAD,
    OWNER,
    REPO,
    T0,
    UNANCHORED,
    Rig,
    budget,
    publisher_rig,
)
from tests.simulator.harness import SAMPLE_DIFF

__all__ = ["publisher_rig"]

pytestmark = pytest.mark.anyio
CRITICAL = replace(ANCHORED, severity="critical", title="SQL built from input")


def check_rows(rig: Rig, key: str) -> list[checks.CheckRow]:
    with rig.store.read() as tx:
        return checks.rows(tx, key)


async def test_an_enqueued_pr_gets_one_queued_check_run_on_its_head(rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.opened(pr)
    rig.queue.enqueue(job, now=rig.now())
    loop = rig.check_runs()

    assert await loop.sync(rig.now()) == 1
    assert await loop.sync(rig.now()) == 0  # nothing changed: nothing sent

    (run,) = rig.github_check_runs()
    assert (run.head_sha, run.name, run.status, run.conclusion) == (
        HEAD, "pr-review-agent", "queued", None)
    assert run.external_id == job.dedupe_key and run.app_id == APP_ID
    assert run.title is not None and run.title.startswith("Queued")
    posts = [r for r in rig.world.requests if r.method == "POST" and "check-runs" in r.path]
    assert len(posts) == 1


async def test_a_mention_is_shown_on_the_pull_requests_head_of_the_moment(rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.ask(pr, command="describe")
    rig.queue.enqueue(job, now=rig.now())

    await rig.check_runs().sync(rig.now())

    (run,) = rig.github_check_runs()
    assert run.head_sha == HEAD and run.name == "pr-review-agent (describe)"


async def test_a_review_goes_queued_in_progress_then_success_with_counts_cost_and_link(
        rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.opened(pr)
    rig.queue.enqueue(job, now=rig.now())
    loop = rig.check_runs()
    await loop.sync(rig.now())

    claim = rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit)
    assert claim is not None
    marks = CheckMarks(lambda: rig.checks)
    with rig.store.transaction() as tx:
        marks.start(tx, marks.target(job.dedupe_key, "review", REPO, pr.number, HEAD), 1,
                    rig.now())
    await loop.sync(rig.now())
    (run,) = rig.github_check_runs()
    assert run.status == "in_progress"

    rig.complete(claim, findings=[ANCHORED, UNANCHORED],
                 usage=Usage(4321, "exact", "claude_code", "m", cost_usd=0.0512))
    await rig.publisher().publish_key(job.dedupe_key)
    await loop.sync(rig.now())

    (run,) = rig.github_check_runs()
    review = rig.reviews(pr)[0]
    assert (run.status, run.conclusion) == ("completed", "success")
    assert run.title == "Reviewed: 1 major, 1 minor"
    assert run.summary is not None
    assert "4 321 tokens ($0.05)" in run.summary
    assert run.details_url == f"https://github.com/{REPO}/pull/{pr.number}" \
                              f"#pullrequestreview-{review.id}"
    assert list(run.history) == [("queued", None), ("in_progress", None),
                                        ("completed", "success")]


async def test_fail_on_makes_a_serious_finding_a_failure_and_a_lesser_one_a_success(
        rig: Rig) -> None:
    rig.checks = ChecksConfig(fail_on="major")
    serious, mild = rig.add_pull(), rig.add_pull(head=NEW_HEAD)
    loop = rig.check_runs()
    for pr, head, finding in ((serious, HEAD, CRITICAL), (mild, NEW_HEAD, UNANCHORED)):
        run = rig.record(rig.opened(pr, head), findings=[finding], head=head)
        await rig.publisher().publish_key(run.dedupe_key)
    await loop.sync(rig.now())

    assert [(r.head_sha, r.conclusion) for r in rig.github_check_runs()] == [
        (HEAD, "failure"), (NEW_HEAD, "success")]
    assert "`major` or more serious" in (rig.github_check_runs(HEAD)[0].summary or "")


async def test_nothing_reviewed_is_never_green(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), omitted=[Omitted("yarn.lock", "excluded", 900, "*.lock")],
                     usage=Usage(0, "exact", None, None))
    await rig.publisher().publish_key(run.dedupe_key)
    await rig.check_runs().sync(rig.now())

    (shown,) = rig.github_check_runs()
    assert (shown.conclusion, shown.title) == ("neutral",
                                               "Not reviewed: nothing left after exclusions")
    assert "`yarn.lock`" in (shown.summary or "")


async def test_a_failed_automatic_review_reports_on_its_check_run_not_in_a_comment(
        rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), outcome="failed", stop_reason="timeout")
    await rig.publisher().publish_key(run.dedupe_key)
    await rig.check_runs().sync(rig.now())

    assert rig.comments(pr) == [] and rig.reviews(pr) == []
    (shown,) = rig.github_check_runs()
    assert shown.conclusion == "neutral"
    assert shown.title == "Not reviewed: the engine ran past its wall clock"


async def test_a_trigger_waiting_for_budget_says_which_window_and_when(tmp_path) -> None:
    rig = Rig.create(tmp_path, budget_config=budget(session=17_000, run=10_000))
    try:
        first, second = rig.add_pull(), rig.add_pull(head=NEW_HEAD)
        rig.record(rig.opened(first), usage=Usage(8000, "exact", "claude_code", "m"))
        job = rig.opened(second, NEW_HEAD)
        rig.queue.enqueue(job, now=rig.now())
        assert rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit) is None

        await rig.check_runs().sync(rig.now())
        (run,) = rig.github_check_runs(NEW_HEAD)
        assert run.status == "queued"
        assert run.title is not None and run.title.startswith(
            "Waiting for budget: the session window frees allowance at 2026-11-02 14:00 UTC")
        assert "runs by itself then" in (run.summary or "")
    finally:
        await rig.aclose()


async def test_waits_for_a_retry_and_for_the_plans_reset_are_worded_from_the_store(
        rig: Rig) -> None:
    retried, limited = rig.add_pull(), rig.add_pull(head=NEW_HEAD)
    loop = rig.check_runs()
    jobs = [rig.opened(retried), rig.opened(limited, NEW_HEAD)]
    for job in jobs:
        rig.queue.enqueue(job, now=rig.now())
    await loop.sync(rig.now())
    claims = [rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit)
              for _ in jobs]
    assert all(c is not None for c in claims)
    by_key = {c.dedupe_key: c for c in claims if c is not None}
    retry_at = rig.now() + timedelta(minutes=1)
    resets = rig.now() + timedelta(hours=2)
    first = by_key[jobs[0].dedupe_key]
    assert rig.governor.settle(first, Usage(0, "exact", None, None), now=rig.now(),
                               stop_reason="infrastructure")
    assert rig.queue.release(first.dedupe_key, OWNER, not_before=retry_at)
    second = by_key[jobs[1].dedupe_key]
    with rig.store.transaction() as tx:
        assert rig.governor.settle(second, Usage(500, "exact", "claude_code", "m"),
                                   now=rig.now(), stop_reason="usage_limit", resets_at=resets,
                                   conn=tx)
        assert queue_lease.defer(tx, second.dedupe_key, OWNER, until=resets)

    await loop.sync(rig.now())

    (retry,) = rig.github_check_runs(HEAD)
    assert retry.title == "Retrying: attempt 1 of 3 did not finish"
    assert "at 2026-11-02 09:01 UTC" in (retry.summary or "")
    (plan,) = rig.github_check_runs(NEW_HEAD)
    assert plan.title == "Waiting for the plan's usage limit to reset at 2026-11-02 11:00 UTC"
    assert rig.queue.get(second.dedupe_key).attempts == 0  # type: ignore[union-attr]


async def test_superseded_cancelled_and_abandoned_triggers_end_neutral(rig: Rig) -> None:
    old, closing, failing = rig.add_pull(), rig.add_pull(), rig.add_pull()
    loop = rig.check_runs()
    jobs = [rig.opened(old), rig.opened(closing), rig.opened(failing)]
    for job in jobs:
        rig.queue.enqueue(job, now=rig.now())
    await loop.sync(rig.now())

    rig.world.push(REPO, old.number, head_sha=NEW_HEAD, diff=SAMPLE_DIFF)
    rig.queue.enqueue(rig.opened(old, NEW_HEAD), now=rig.now())  # the push supersedes it
    rig.queue.cancel_pull_request(REPO, closing.number)
    with rig.store.transaction() as tx:  # three attempts that all failed
        tx.execute("UPDATE queue SET status = ?, attempts = 3 WHERE dedupe_key = ?",
                   (ABANDONED, jobs[2].dedupe_key))
    await loop.sync(rig.now())

    ended = {r.external_id: (r.conclusion, r.title) for r in rig.github_check_runs(HEAD)}
    assert ended == {
        jobs[0].dedupe_key: ("neutral", "Not reviewed: superseded by a newer head"),
        jobs[1].dedupe_key: ("neutral", "Not reviewed: the pull request was closed"),
        jobs[2].dedupe_key: ("neutral", "Not reviewed: failed after 3 attempts"),
    }
    assert [r.status for r in rig.github_check_runs(NEW_HEAD)] == ["queued"]


async def test_a_head_superseded_before_its_check_run_opened_still_gets_one_that_says_so(
        rig: Rig) -> None:
    pr = rig.add_pull()
    first = rig.opened(pr)
    rig.queue.enqueue(first, now=rig.now())
    rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=SAMPLE_DIFF)
    rig.queue.enqueue(rig.opened(pr, NEW_HEAD), now=rig.now())

    await rig.check_runs().sync(rig.now())

    (old,) = rig.github_check_runs(HEAD)
    assert (old.status, old.conclusion, old.history) == (
        "completed", "neutral", [("completed", "neutral")])
    assert [r.status for r in rig.github_check_runs(NEW_HEAD)] == ["queued"]


async def test_a_mention_answered_on_a_newer_head_ends_the_older_check_run(rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.ask(pr)
    rig.queue.enqueue(job, now=rig.now())
    loop = rig.check_runs()
    await loop.sync(rig.now())
    rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=SAMPLE_DIFF)
    claim = rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit)
    assert claim is not None

    rig.complete(claim, findings=[ANCHORED], head=NEW_HEAD)
    await rig.publisher().publish_key(job.dedupe_key)
    await loop.sync(rig.now())

    (old,) = rig.github_check_runs(HEAD)
    (new,) = rig.github_check_runs(NEW_HEAD)
    assert (old.conclusion, old.title) == ("neutral", f"Answered on the newer head {NEW_HEAD[:7]}")
    assert new.conclusion == "success" and old.external_id == new.external_id


async def test_a_dry_run_pushes_nothing_and_a_disabled_loop_writes_nothing(rig: Rig) -> None:
    pr = rig.add_pull()
    rig.queue.enqueue(rig.opened(pr), now=rig.now())
    rig.set_config(dry_run=True)
    assert await rig.check_runs().sync(rig.now()) == 0
    assert rig.github_check_runs() == []

    rig.checks = ChecksConfig(enabled=False)
    rig.set_config(dry_run=False)
    claim = rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit)
    assert claim is not None
    run = rig.complete(claim)
    await rig.publisher().publish_key(run.dedupe_key)
    assert await rig.check_runs().sync(rig.now()) == 0
    assert len(rig.reviews(pr)) == 1 and rig.github_check_runs() == []
    assert [r.state.status for r in check_rows(rig, run.dedupe_key)] == ["queued"]


def test_the_words_of_each_ending_say_what_to_do() -> None:
    too_large = text.refused_size(3, 9000, 5000, "@claude")
    assert too_large.conclusion == "neutral"
    assert too_large.title == "Not reviewed: too large (3 files, each over 5000 lines)"
    assert "largest has 9 000 lines" in too_large.summary
    assert "`@claude review`" in too_large.summary
    estimate = text.refused_estimate(84_000, 60_000, 7000, "@claude")
    assert estimate.title == "Not reviewed: estimated 84 000 tokens, over the 60 000-token limit"
    shown = text.reviewed(["nit"], tokens=None, cost_usd=None, url=None, fail_on="nit")
    assert shown.conclusion == "failure"
    assert "an unknown number of tokens (dollars not reported by the engine)" in shown.summary
    with pytest.raises(ValueError, match="conclusion"):
        checks.CheckState("completed", "t", "s")


def test_a_completed_check_run_is_never_reopened(tmp_path) -> None:

    with new_sqlite_store(tmp_path / "s.db") as store:
        target = checks.Target("pr_opened:o/r:1:" + "a" * 40, "a" * 40, "o/r", 1, "n")
        with store.transaction() as tx:
            assert checks.show(tx, target, text.queued("review"), T0)
            assert checks.show(tx, target, text.superseded(None), T0)
            assert not checks.show(tx, target, text.queued("review"), T0)
            assert not checks.show(tx, target, text.superseded(None), T0)  # unchanged
            (row,) = checks.rows(tx, target.dedupe_key)
        assert (row.state.status, row.version) == ("completed", 2)

