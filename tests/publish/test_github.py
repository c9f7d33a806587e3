"""GitHubPublisher against the simulator: every outcome, the 422 fallback, never twice
(crash after posting, applied faults, concurrent attempts), dry run, rate limits, failures
and re-offering, descriptions, and the App's own posts never triggering it."""

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
from service.publish.markers import DESCRIPTION_END, DESCRIPTION_START, OUTDATED, run_marker
from service.publish.retry import republish_pending
from service.publish.run_content import Omitted
from service.storage.agent_comments import AgentComments
from tests.publisher_rig import (
    ANCHORED,
    APP_ID,
    BOT,
    HEAD,
    NEW_HEAD,
    PHRASE,
    REPO,
    SLUG,
    UNANCHORED,
    Rig,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)

REVIEWS = f"/repos/{REPO}/pulls/*/reviews"
ISSUE_COMMENTS = f"/repos/{REPO}/issues/*/comments"



def posts(rig: Rig, glob: str) -> list[Any]:
    return list(rig.world.requests.matching("POST", glob))


# -- published ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_review_is_pinned_to_the_head_inline_where_the_diff_allows(rig: Rig) -> None:
    pr = rig.add_pull()
    omitted = (Omitted(path="yarn.lock", reason="excluded", lines=900, pattern="*.lock"),)
    run = rig.record(rig.ask(pr), findings=(ANCHORED, UNANCHORED), omitted=omitted,
                     reviewed_since=None)
    publisher = rig.publisher()

    result = await publisher.publish_key(run.dedupe_key)

    assert result.status == "published" and not result.existing
    (review,) = rig.reviews(pr)
    assert review.state == "COMMENTED" and review.commit_id == HEAD
    assert result.comment_id == review.id
    (comment,) = rig.inline(pr)
    assert (comment.path, comment.line, comment.start_line, comment.side) == (
        "src/app.py", 3, 2, "RIGHT")
    assert "json is imported twice" in comment.body
    body = review.body
    assert body.splitlines()[0] == run_marker(run.dedupe_key)
    assert "helper is long" in body and "json is imported twice" not in body
    assert "yarn.lock" in body and "*.lock" in body
    assert "4,321 tokens (exact count)" in body and "claude_code" in body
    assert "claude-test-1" in body and "full review" in body
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] == "published" and row["comment_id"] == review.id
    assert row["published_at"] is not None and row["publish_attempts"] == 1
    assert row["publish_failed_at"] is None and row["publish_lease_until"] is None
    assert comment.id in rig.agent_comment_ids()


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
    assert "Partial review" in body
    assert "tokens not measured" in body and "10,000 tokens was charged" in body


# -- the 422 fallback ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_refused_anchor_is_posted_once_more_with_everything_in_the_body(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED, UNANCHORED))
    # GitHub refuses the whole review for one anchor it cannot resolve (it does not say
    # which): the first review POST is answered 422 and nothing is created.
    rig.world.faults.add(method="POST", path_glob=REVIEWS, status=422, body={
        "message": "Unprocessable Entity", "errors": ["Line could not be resolved"]})

    result = await rig.publisher().publish_key(run.dedupe_key)

    assert result.status == "published"
    attempts = posts(rig, REVIEWS)
    assert len(attempts) == 2
    assert "comments" in attempts[0].json() and "comments" not in attempts[1].json()
    (review,) = rig.reviews(pr)
    assert rig.inline(pr) == []
    assert "json is imported twice" in review.body and "helper is long" in review.body
    assert "did not accept the inline comments" in review.body
    assert rig.run_row(run.dedupe_key)["publish_attempts"] == 2


@pytest.mark.anyio
async def test_a_second_422_stamps_the_failure_and_clearing_it_offers_the_run_again(
        rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    rig.world.faults.add(method="POST", path_glob=REVIEWS, status=422, times=2,
                         body={"message": "Unprocessable Entity", "errors": ["nope"]})
    publisher = rig.publisher()
    assert (await publisher.publish_key(run.dedupe_key)).status == "failed"
    row = rig.run_row(run.dedupe_key)
    assert row["publish_failed_at"] is not None and row["publish_outcome"] is None
    assert rig.reviews(pr) == []
    assert await republish_pending(rig.store, publisher, rig.now()) == 0  # not offered

    with rig.store.transaction() as conn:  # the operator's statement (docs/OPERATIONS.md)
        conn.execute("UPDATE runs SET publish_failed_at = NULL, publish_attempts = 0"
                     " WHERE dedupe_key = ?", (run.dedupe_key,))
    assert await republish_pending(rig.store, publisher, rig.now()) == 1
    assert len(rig.reviews(pr)) == 1
    assert rig.run_row(run.dedupe_key)["publish_outcome"] == "published"


@pytest.mark.anyio
async def test_forbidden_and_not_found_are_failures_not_retries(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(UNANCHORED,))
    rig.world.faults.add(method="POST", path_glob=REVIEWS, status=403, times=None,
                         body={"message": "Resource not accessible by integration"})
    assert (await rig.publisher().publish_key(run.dedupe_key)).status == "failed"
    assert rig.run_row(run.dedupe_key)["publish_failed_at"] is not None

    gone = rig.record(rig.opened(rig.add_pull()), findings=(UNANCHORED,))
    rig.world.faults.add(method="GET", path_glob=f"/repos/{REPO}/pulls/2", status=404,
                         times=None, body={"message": "Not Found"})
    assert (await rig.publisher().publish_key(gone.dedupe_key)).status == "failed"


# -- never twice ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_crash_between_posting_and_recording_costs_no_second_review(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED, UNANCHORED))
    first = rig.publisher()

    async def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the process died right after GitHub accepted the review")

    monkeypatch.setattr(first, "_record", crash)
    assert (await first.publish_key(run.dedupe_key)).status == "retry"
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


# -- superseded, refused, dry run -------------------------------------------------------------


@pytest.mark.anyio
async def test_an_automatic_review_of_a_moved_head_is_superseded_and_not_posted(
        rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), findings=(ANCHORED,))
    rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=pr.head.diff)
    result = await rig.publisher().publish_key(run.dedupe_key)
    assert result.status == "superseded"
    assert rig.reviews(pr) == [] and rig.comments(pr) == []
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] == "superseded" and row["published_at"] is None


@pytest.mark.anyio
async def test_a_mention_for_a_moved_head_gets_an_outdated_comment_not_a_review(
        rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED, UNANCHORED))
    rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=pr.head.diff)
    result = await rig.publisher().publish_key(run.dedupe_key)
    assert result.status == "superseded"
    assert rig.reviews(pr) == []
    (comment,) = rig.comments(pr)
    assert OUTDATED in comment.body and "2c2c2c2c2c2c" in comment.body
    assert "json is imported twice" in comment.body and "helper is long" in comment.body
    row = rig.run_row(run.dedupe_key)
    assert row["publish_outcome"] == "superseded" and row["comment_id"] == comment.id
    assert comment.id in rig.agent_comment_ids()


@pytest.mark.anyio
async def test_a_failed_run_tells_the_person_who_asked_and_nobody_else(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), outcome="failed", stop_reason="timeout")
    result = await rig.publisher().publish_key(run.dedupe_key)
    assert result.status == "refused"
    (comment,) = rig.comments(pr)
    assert comment.body.count("@bob") == 1 and "time limit" in comment.body
    assert rig.reviews(pr) == []
    assert rig.run_row(run.dedupe_key)["publish_outcome"] == "refused"

    quiet = rig.add_pull()
    auto = rig.record(rig.opened(quiet), outcome="failed", stop_reason="engine_error")
    assert (await rig.publisher().publish_key(auto.dedupe_key)).status == "refused"
    assert rig.comments(quiet) == [] and rig.reviews(quiet) == []


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


# -- descriptions -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_description_is_a_comment_by_default(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr, command="describe"), description=Description(
        f"Ping {PHRASE} review", "Adds <!-- hidden --> logging.", ("a", "b")))
    await rig.publisher().publish_key(run.dedupe_key)
    (comment,) = rig.comments(pr)
    assert comment.body.startswith(run_marker(run.dedupe_key))
    assert "Suggested description" in comment.body and "- a\n- b" in comment.body
    assert "hidden" not in comment.body
    assert find_mention(comment.body, PHRASE) is None
    assert rig.world.issue(REPO, pr.number).body == "Author text."


@pytest.mark.anyio
async def test_a_description_can_be_written_into_the_body_keeping_the_authors_text(
        rig: Rig) -> None:
    rig.set_config(describe_updates_body=True)
    pr = rig.add_pull(body="My own words.\n\nCloses #3.")
    first = rig.record(rig.ask(pr, command="describe"),
                       description=Description("First", "One.", ()))
    publisher = rig.publisher()
    await publisher.publish_key(first.dedupe_key)
    body = rig.world.issue(REPO, pr.number).body or ""
    assert body.startswith("My own words.\n\nCloses #3.\n")
    assert DESCRIPTION_START in body and DESCRIPTION_END in body and "One." in body
    assert rig.comments(pr) == []

    second = rig.record(rig.ask(pr, command="describe"),
                        description=Description("Second", "Two.", ()))
    await publisher.publish_key(second.dedupe_key)
    body = rig.world.issue(REPO, pr.number).body or ""
    assert body.count("My own words.") == 1 and body.count(DESCRIPTION_START) == 1
    assert "Two." in body and "One." not in body
    assert rig.run_row(second.dedupe_key)["publish_outcome"] == "published"

    # A retry that finds its marker in the body writes nothing.
    with rig.store.transaction() as conn:
        conn.execute("UPDATE runs SET publish_outcome = NULL WHERE dedupe_key = ?",
                     (second.dedupe_key,))
    patches = len(rig.world.requests.matching("PATCH"))
    result = await publisher.publish_key(second.dedupe_key)
    assert result.existing and len(rig.world.requests.matching("PATCH")) == patches


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

    from service.publish import records as run_records
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
