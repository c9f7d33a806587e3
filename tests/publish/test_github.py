"""GitHubPublisher against the simulator: the attempt (posts.py has what each kind posts):
never twice (crash after posting, applied faults, concurrent attempts), dry run, rate
limits and re-offering, the publication lease, and the App's own posts never triggering it."""

from __future__ import annotations

from typing import Any, Literal

import anyio
import pytest

from service.budget.usage import Usage
from service.config.schema import TriggersConfig
from service.engine.base import Assessment, Description, Finding
from service.intake.rules.classify import classify_comment, classify_event
from service.intake.rules.decisions import Ignore, TriggerContext
from service.intake.rules.mention import find_mention
from service.publish import records as run_records
from service.publish.retry import republish_pending
from service.publish.run_content import Coverage, Omitted
from service.storage import checks
from service.storage.agent_comments import AgentComments
from service.storage.checks import CheckState
from tests.publisher_rig import (
    ANCHORED,
    APP_ID,
    BOT,
    ISSUE_COMMENTS,
    PHRASE,
    REPO,
    REVIEWS,
    SLUG,
    UNANCHORED,
    Rig,
    posts,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)

# -- published ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_ack_reacts_once_on_the_comment_or_the_pull_request(rig: Rig) -> None:
    pr = rig.add_pull()
    mention = rig.claim(rig.ask(pr))
    publisher = rig.publisher()
    await publisher.ack(mention)
    await publisher.ack(mention)  # a retried attempt acknowledges again, harmlessly
    comment = rig.world.issue_comments[mention.job.comment_id or 0]
    assert [(r.content, r.user.login) for r in comment.reactions] == [("eyes", BOT)]

    other = rig.add_pull()
    opened = rig.claim(rig.opened(other))
    await publisher.ack(opened)
    assert [r.content for r in rig.world.issue(REPO, other.number).reactions] == ["eyes"]


@pytest.mark.anyio
async def test_incremental_reduced_and_partial_runs_say_so(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), findings=(UNANCHORED,), outcome="truncated",
                     stop_reason="truncated", reviewed_since="3d" * 20,
                     usage=Usage(tokens=None, confidence="unavailable", engine="claude_code",
                                 model=None))
    with rig.store.transaction() as conn:  # admitted when the budget was past 60 %
        conn.execute("UPDATE ledger SET mode = 'reduced' WHERE dedupe_key = ?",
                     (run.dedupe_key,))
    await rig.publisher().publish_key(run.dedupe_key)
    body = rig.reviews(pr)[0].body
    assert "Reviewed the changes since `3d3d3d3d3d3d`" in body
    assert "Reduced review" in body and "correctness and security" in body
    assert "**Stopped early.**" in body and "findings are what it had found" in body
    assert "tokens not measured" in body and "10,000 tokens was charged" in body


def completed_check(rig: Rig, key: str) -> CheckState:
    """The check run the publication ended ``key``'s trigger with, as stored."""
    with rig.store.read() as tx:
        [state] = [r.state for r in checks.rows(tx, key) if r.state.status == checks.COMPLETED]
    return state


@pytest.mark.anyio
async def test_a_review_that_read_nothing_never_looks_like_a_clean_one(rig: Rig) -> None:
    # The model's window took no file: nothing was read, and every post says so.
    pr = rig.add_pull()
    over = (Omitted("src/a.py", "over_window", 14_000), Omitted("web/b.ts", "over_window", 700))
    run = rig.record(rig.opened(pr), outcome="truncated", stop_reason="refused",
                     omitted=over, coverage=Coverage(files=2, reviewed=0, parts=0),
                     usage=Usage(tokens=0, confidence="exact", engine="openai_compatible",
                                 model="m"))
    await rig.publisher().publish_key(run.dedupe_key)
    body = rig.reviews(pr)[0].body
    assert "Reviewed 0 of 2 files (2 not reviewed: 2 over the model's window" in body
    assert "Nothing was reviewed: no changed file was read" in body
    assert "the change is empty" not in body and "No findings" not in body
    assert "too large for the model's context window even alone" in body
    check = completed_check(rig, run.dedupe_key)
    assert (check.conclusion, check.title) == ("neutral", "Not reviewed: 0 of 2 files read")


@pytest.mark.anyio
async def test_a_partial_review_names_its_coverage_on_the_check_and_in_the_body(
        rig: Rig) -> None:
    pr = rig.add_pull()
    left = (Omitted("package-lock.json", "lock_file", 9_000),
            Omitted("big.py", "over_window", 20_000))
    run = rig.record(rig.opened(pr), findings=(UNANCHORED,), omitted=left,
                     outcome="truncated", coverage=Coverage(
                         files=5, reviewed=3, parts=2,
                         pruned=("4 hunks that only delete lines",)))
    await rig.publisher().publish_key(run.dedupe_key)
    body = rig.reviews(pr)[0].body
    assert ("**Partial review.** Reviewed 3 of 5 files (2 not reviewed: 1 lock file, 1 over "
            "the model's window — listed below). The change is larger than the model's "
            "window, so it was read in 2 parts. To fit, the diff sent left out 4 hunks that "
            "only delete lines.") in body
    check = completed_check(rig, run.dedupe_key)
    assert check.conclusion == "neutral"
    assert check.title.startswith("Reviewed 3 of 5 files: 1 ")


# -- never twice ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_crash_between_posting_and_recording_costs_no_second_review(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED, UNANCHORED))
    first = rig.publisher()

    def crash(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("the process died right after GitHub accepted the review")

    # The recording transaction breaks: nothing of it is kept, as after a crash.
    monkeypatch.setattr(run_records, "record_outcome", crash)
    assert (await first.publish_key(run.dedupe_key)).status == "retry"
    monkeypatch.undo()
    assert len(rig.reviews(pr)) == 1
    assert rig.run_row(run.dedupe_key)["publish_outcome"] is None

    restarted = rig.publisher()  # a new process: nothing in memory
    assert await republish_pending(rig.store, restarted, rig.now()) == 1

    (review,) = rig.reviews(pr)
    assert len(posts(rig, REVIEWS)) == 1
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] == "published" and row["comment_id"] == review.id
    assert {c.id for c in rig.inline(pr)} <= rig.agent_comment_ids()
    assert await republish_pending(rig.store, restarted, rig.now()) == 0


@pytest.mark.anyio
async def test_a_post_applied_but_answered_with_an_error_is_found_not_repeated(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr, command="describe"), description=Description(
        "Add logging", "Adds a logger.", ("log on start",)))
    rig.world.faults.server_error(method="POST", path_glob=ISSUE_COMMENTS, status=502,
                                  applied=True)
    publisher = rig.publisher()
    assert (await publisher.publish_key(run.dedupe_key)).status == "retry"
    assert len(rig.comments(pr)) == 1  # GitHub did it; only the answer was lost
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] is None and row["publish_lease_until"] is None

    result = await publisher.publish_key(run.dedupe_key)
    assert result.existing and result.status == "published"
    (comment,) = rig.comments(pr)
    assert rig.run_row(run.dedupe_key)["comment_id"] == comment.id
    assert comment.id in rig.agent_comment_ids()


@pytest.mark.anyio
async def test_two_attempts_at_once_post_once(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(UNANCHORED,))
    one, two = rig.publisher(), rig.publisher()
    results: list[str] = []

    async def attempt(publisher: Any) -> None:
        results.append((await publisher.publish_key(run.dedupe_key)).status)

    async with anyio.create_task_group() as tg:
        tg.start_soon(attempt, one)
        tg.start_soon(attempt, two)
    assert sorted(results) == ["published", "skipped"]
    assert len(rig.reviews(pr)) == 1


@pytest.mark.anyio
async def test_a_secondary_rate_limit_mid_publishing_waits_and_posts_once(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    rig.world.faults.secondary_limit(method="POST", path_glob=REVIEWS, retry_after=30)

    result = await rig.publisher().publish_key(run.dedupe_key)

    assert result.status == "published"
    assert 30 in rig.sleeps
    assert [r.status for r in posts(rig, REVIEWS)] == [403, 200]
    assert len(rig.reviews(pr)) == 1 and len(rig.inline(pr)) == 1
    assert rig.run_row(run.dedupe_key)["publish_attempts"] == 1


@pytest.mark.anyio
async def test_a_transient_failure_is_retried_by_the_re_offer(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), findings=(UNANCHORED,))
    rig.world.faults.server_error(method="GET", path_glob=f"/repos/{REPO}/pulls/1", status=502,
                                  times=4)
    publisher = rig.publisher()
    assert (await publisher.publish_key(run.dedupe_key)).status == "retry"
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] is None and row["publish_failed_at"] is None
    assert await republish_pending(rig.store, publisher, rig.now()) == 1
    assert len(rig.reviews(pr)) == 1
    assert rig.run_row(run.dedupe_key)["publish_attempts"] == 2


# -- dry run ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_dry_run_records_without_touching_github_and_reloads(rig: Rig) -> None:
    pr = rig.add_pull()
    rig.set_config(dry_run=True)
    publisher = rig.publisher()
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    claim = rig.claim(rig.ask(rig.add_pull()))
    before = len(rig.world.requests.matching())
    await publisher.ack(claim)
    assert (await publisher.publish_key(run.dedupe_key)).status == "dry_run"
    assert len(rig.world.requests.matching()) == before  # not even a read
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] == "dry_run" and row["published_at"] is not None
    assert await republish_pending(rig.store, publisher, rig.now()) == 0

    rig.set_config(dry_run=False)  # SIGHUP: the same publisher sees it at once
    live = rig.record(rig.ask(pr), findings=(ANCHORED,))
    assert (await publisher.publish_key(live.dedupe_key)).status == "published"
    assert len(rig.reviews(pr)) == 1


# -- the App's own posts never trigger it -------------------------------------------------------


@pytest.mark.anyio
async def test_the_apps_posts_never_trigger_it_by_webhook_or_by_poll(rig: Rig) -> None:
    pr = rig.add_pull()
    loud = Finding(path="src/app.py", line=3, side="RIGHT", start_line=None, severity="nit",
                   category="style", title=f"{PHRASE} review this again",
                   body=f"{PHRASE} describe, please. \u202e")
    publisher = rig.publisher()
    for run in (rig.record(rig.ask(pr), findings=(loud, UNANCHORED),
                           assessment=Assessment(f"{PHRASE} review", "low")),
                rig.record(rig.ask(pr, command="describe"),
                           description=Description(f"{PHRASE} review", f"{PHRASE} x", ())),
                rig.record(rig.ask(pr), outcome="failed", stop_reason="timeout")):
        await publisher.publish_key(run.dedupe_key)
    rig.settle_refused(rig.ask(pr))  # and a notice
    assert await publisher.notify_refusals(rig.governor, rig.now()) == 1
    ctx = TriggerContext(config=TriggersConfig(mention=PHRASE), app_id=APP_ID, app_slug=SLUG,
                         agent_comments=AgentComments(rig.store))
    mine = [e for e in rig.world.events
            if e.event in ("issue_comment", "pull_request_review_comment",
                           "pull_request_review")]
    assert {e.event for e in mine} == {"issue_comment", "pull_request_review_comment",
                                       "pull_request_review"}
    for emitted in mine:  # the webhook path
        decision = classify_event(emitted.event, emitted.payload, ctx)
        assert isinstance(decision, Ignore), (emitted.event, decision)

    # The poller path: the REST listings the poller reads.
    checked: list[str] = []
    sources: tuple[tuple[Literal["issue", "review"], str], ...] = (
        ("issue", f"/repos/{REPO}/issues/comments"), ("review", f"/repos/{REPO}/pulls/comments"))
    for source, path in sources:
        async for item in rig.github.paginate(rig.installation_id, path):
            if item["user"]["login"] != BOT:
                continue
            assert isinstance(classify_comment(item, source, REPO, pr.number, ctx), Ignore)
            # Even a comment stripped of every App marking is ignored: its id is recorded
            # (agent_comments) and the phrase in it is neutralised.
            disguised = {**item, "user": {**item["user"], "type": "User", "login": "someone"},
                         "author_association": "OWNER", "performed_via_github_app": None}
            decision = classify_comment(disguised, source, REPO, pr.number, ctx)
            assert isinstance(decision, Ignore) and decision.reason == "own_comment"
            assert find_mention(item["body"], PHRASE) is None
            assert "\u202e" not in item["body"]
            checked.append(source)
    # the review's inline comment, the description, the reply to a failed run, the notice
    assert sorted(checked) == ["issue", "issue", "issue", "review"]


# -- the publication lease: short, renewed while a post runs ------------------------------


@pytest.mark.anyio
async def test_a_dead_holders_run_is_posted_once_its_short_lease_lapses(rig: Rig) -> None:
    from datetime import timedelta

    from service.publish.github import PUBLISH_LEASE

    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), findings=(ANCHORED,))
    # The holder takes the lease and is SIGKILLed before it posts or releases.
    with rig.store.transaction() as conn:
        assert run_records.claim(conn, run.dedupe_key, rig.now(),
                                 rig.now() + PUBLISH_LEASE) is not None
    assert await republish_pending(rig.store, rig.publisher(), rig.now()) == 0  # held
    assert PUBLISH_LEASE <= timedelta(seconds=30)
    rig.world.clock.advance(PUBLISH_LEASE.total_seconds() + 1)
    assert await republish_pending(rig.store, rig.publisher(), rig.now()) == 1
    assert len(rig.reviews(pr)) == 1
    assert await republish_pending(rig.store, rig.publisher(), rig.now()) == 0  # never twice


@pytest.mark.anyio
async def test_the_lease_is_renewed_while_a_slow_post_runs(rig: Rig) -> None:
    import time
    from datetime import timedelta

    from service.publish.github import GitHubPublisher
    from service.storage.times import from_db_time

    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), findings=(ANCHORED,))
    t0, started = rig.now(), time.monotonic()

    def clock() -> Any:  # this publisher's time runs as the host's does
        return t0 + timedelta(seconds=time.monotonic() - started)

    slow = GitHubPublisher(store=rig.store, github=rig.github,
                           installations=rig.installations, clock=clock,
                           config=lambda: rig.config, mention=PHRASE, bot_login=lambda: BOT,
                           lease=timedelta(seconds=3))
    rig.world.faults.slow(path_glob=f"/repos/{REPO}/pulls/*/reviews", delay=5.0, times=1)
    seen: list[Any] = []

    async def watch() -> None:
        await anyio.sleep(4.0)  # past the first lease's end, during the slow post
        seen.append(rig.run_row(run.dedupe_key)["publish_lease_until"])

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(watch)
        result = await slow.publish_key(run.dedupe_key)
    assert result.status == "published"
    # Renewed: held beyond the first lease (t0 + 3 s), so nobody else took the run.
    assert seen[0] is not None and from_db_time(str(seen[0])) > t0 + timedelta(seconds=4)
    assert len(rig.reviews(pr)) == 1


@pytest.mark.anyio
async def test_a_description_that_read_nothing_tells_the_asker_why(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr, command="describe"), outcome="failed", stop_reason="refused",
                     omitted=(Omitted("src/a.py", "over_window", 14_000),),
                     coverage=Coverage(files=1, reviewed=0, parts=0),
                     usage=Usage(tokens=0, confidence="exact", engine="anthropic", model="m"))
    await rig.publisher().publish_key(run.dedupe_key)
    [comment] = rig.comments(pr)
    assert "no changed file was read (1 over the model's window)" in comment.body
    assert "declined" not in comment.body
    check = completed_check(rig, run.dedupe_key)
    assert (check.conclusion, check.title) == ("neutral", "Not reviewed: 0 of 1 file read")
