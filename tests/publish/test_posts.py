"""What a publication attempt posts, by kind: a review (inline where the diff allows, all
in the body after a 422), a failed run's reply, an outdated result, a description."""

from __future__ import annotations

import pytest

from service.engine.base import Description
from service.intake.rules.mention import find_mention
from service.publish.markers import DESCRIPTION_END, DESCRIPTION_START, OUTDATED, run_marker
from service.publish.retry import republish_pending
from service.publish.run_content import Omitted
from tests.publisher_rig import (
    ANCHORED,
    HEAD,
    NEW_HEAD,
    PHRASE,
    REPO,
    REVIEWS,
    UNANCHORED,
    Rig,
    posts,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)


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
