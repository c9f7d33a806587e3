"""pull_request events and REST pull request objects: auto review, pushes, closing."""

from __future__ import annotations

import pytest

from service.config.schema import TriggersConfig
from service.github.payload import PayloadError
from service.intake.rules.classify import classify_event, classify_pull_request
from service.intake.rules.decisions import Close, Enqueue, Ignore, TriggerContext
from service.model.jobs import Job
from tests.payloads import (
    APP_ID,
    APP_SLUG,
    HEAD_SHA,
    bot_user,
    pull_request,
    pull_request_event,
    user,
)

REPO = "Codertocat/Hello-World"
NEW_SHA = "0123456789abcdef0123456789abcdef01234567"


def ctx(**triggers: object) -> TriggerContext:
    return TriggerContext(TriggersConfig(**triggers), APP_ID, APP_SLUG)  # type: ignore[arg-type]


def expected_job(sha: str = HEAD_SHA, number: int = 2) -> Job:
    return Job(kind="pr_opened", repo=REPO, pr_number=number, actor_id=21031067, head_sha=sha)


@pytest.mark.parametrize("action", ["opened", "reopened", "ready_for_review"])
def test_review_actions_enqueue_the_head(action: str) -> None:
    decision = classify_event("pull_request", pull_request_event(action), ctx())
    assert decision == Enqueue(expected_job())
    assert isinstance(decision, Enqueue)
    assert decision.job.dedupe_key == f"pr_opened:{REPO}:2:{HEAD_SHA}"
    assert decision.job.actor_id == 21031067  # the pull request's author


def test_actor_is_the_author_not_the_sender() -> None:
    pr = pull_request(author=user("alice", 7))
    payload = pull_request_event("reopened", pr, sender=user("maintainer", 99))
    decision = classify_event("pull_request", payload, ctx())
    assert isinstance(decision, Enqueue)
    assert decision.job.actor_id == 7


@pytest.mark.parametrize("action", ["opened", "reopened", "synchronize"])
def test_draft_is_not_reviewed(action: str) -> None:
    payload = pull_request_event(action, pull_request(draft=True))
    assert classify_event("pull_request", payload, ctx(on_push=True)) == Ignore("draft")


def test_auto_review_off() -> None:
    for action in ("opened", "reopened", "ready_for_review", "synchronize"):
        decision = classify_event("pull_request", pull_request_event(action),
                                  ctx(auto_review=False, on_push=True))
        assert decision == Ignore("auto_review_off"), action


def test_synchronize_needs_on_push() -> None:
    payload = pull_request_event("synchronize", pull_request(head_sha=NEW_SHA))
    assert classify_event("pull_request", payload, ctx()) == Ignore("on_push_off")
    decision = classify_event("pull_request", payload, ctx(on_push=True))
    assert decision == Enqueue(expected_job(NEW_SHA))
    assert isinstance(decision, Enqueue)
    assert decision.job.dedupe_key == f"pr_opened:{REPO}:2:{NEW_SHA}"


def test_on_push_does_not_change_opened() -> None:
    payload = pull_request_event("opened")
    assert classify_event("pull_request", payload, ctx(on_push=True)) == Enqueue(expected_job())


@pytest.mark.parametrize("merged", [True, False])
def test_closed_is_a_close_signal(merged: bool) -> None:
    payload = pull_request_event("closed", pull_request(state="closed", merged=merged))
    assert classify_event("pull_request", payload, ctx()) == Close(REPO, 2, merged)
    # A close is a close whatever the review settings say.
    assert classify_event("pull_request", payload, ctx(auto_review=False)) == Close(REPO, 2, merged)


@pytest.mark.parametrize(
    "action",
    ["labeled", "unlabeled", "edited", "assigned", "converted_to_draft", "review_requested",
     "locked", "milestoned", "auto_merge_enabled", "enqueued", "some_future_action"],
)
def test_other_actions_are_ignored(action: str) -> None:
    decision = classify_event("pull_request", pull_request_event(action), ctx())
    assert decision == Ignore(f"action:{action}")


def test_bot_authors_are_not_auto_reviewed() -> None:
    payload = pull_request_event("opened", pull_request(author=bot_user()))
    assert classify_event("pull_request", payload, ctx()) == Ignore("bot_author", "dependabot[bot]")
    # A "[bot]" login is a bot even if the type says otherwise.
    payload = pull_request_event("opened", pull_request(author=user("renovate[bot]", 5, "User")))
    decision = classify_event("pull_request", payload, ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "bot_author"


def test_head_sha_is_normalised_and_checked() -> None:
    payload = pull_request_event("opened", pull_request(head_sha=HEAD_SHA.upper()))
    assert classify_event("pull_request", payload, ctx()) == Enqueue(expected_job())
    sha256 = "a" * 64
    payload = pull_request_event("opened", pull_request(head_sha=sha256))
    assert classify_event("pull_request", payload, ctx()) == Enqueue(expected_job(sha256))
    payload = pull_request_event("opened", pull_request(head_sha="not-a-sha"))
    decision = classify_event("pull_request", payload, ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "malformed_payload"
    assert "pull_request.head.sha" in decision.detail


def test_rest_object_gives_the_webhooks_job() -> None:
    rest = pull_request(rest=True)
    assert "merged" not in rest
    webhook = classify_event("pull_request", pull_request_event("opened"), ctx())
    polled = classify_pull_request(rest, REPO, ctx())
    assert polled == webhook
    assert isinstance(polled, Enqueue)
    assert isinstance(webhook, Enqueue)
    assert polled.job.dedupe_key == webhook.job.dedupe_key


def test_rest_pushed_follows_on_push() -> None:
    rest = pull_request(head_sha=NEW_SHA, rest=True)
    assert classify_pull_request(rest, REPO, ctx(), pushed=True) == Ignore("on_push_off")
    assert classify_pull_request(rest, REPO, ctx(on_push=True), pushed=True) == Enqueue(
        expected_job(NEW_SHA)
    )
    # Not pushed: a pull request first seen, or seen leaving draft, is reviewed at its head.
    assert classify_pull_request(rest, REPO, ctx()) == Enqueue(expected_job(NEW_SHA))


def test_rest_draft_then_ready() -> None:
    draft = pull_request(draft=True, rest=True)
    assert classify_pull_request(draft, REPO, ctx()) == Ignore("draft")
    assert classify_pull_request(pull_request(rest=True), REPO, ctx()) == Enqueue(expected_job())


@pytest.mark.parametrize("merged", [True, False])
def test_rest_closed_uses_merged_at(merged: bool) -> None:
    rest = pull_request(state="closed", merged=merged, rest=True)
    assert classify_pull_request(rest, REPO, ctx()) == Close(REPO, 2, merged)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda pr: pr.pop("number"), "pull_request.number"),
        (lambda pr: pr.update(number=True), "pull_request.number"),
        (lambda pr: pr.update(number="2"), "pull_request.number"),
        (lambda pr: pr.pop("head"), "pull_request.head"),
        (lambda pr: pr["head"].pop("sha"), "pull_request.head.sha"),
        (lambda pr: pr.update(user=None), "pull_request.user"),
        (lambda pr: pr["user"].pop("id"), "pull_request.user.id"),
        (lambda pr: pr.update(draft="yes"), "pull_request.draft"),
    ],
)
def test_malformed_objects_raise_with_the_path(mutate: object, path: str) -> None:
    pr = pull_request(rest=True)
    mutate(pr)  # type: ignore[operator]
    with pytest.raises(PayloadError, match=path.replace(".", r"\.")):
        classify_pull_request(pr, REPO, ctx())


@pytest.mark.parametrize("repo", ["", "noslash", "a/b/c", "/name", "owner/", " a/b", None])
def test_repo_must_be_owner_slash_name(repo: object) -> None:
    with pytest.raises(PayloadError, match="owner/name"):
        classify_pull_request(pull_request(rest=True), repo, ctx())  # type: ignore[arg-type]


def test_repo_comes_from_repository_full_name() -> None:
    payload = pull_request_event("opened", pull_request(repo="octo-org/other-repo"),
                                 repo="octo-org/other-repo")
    decision = classify_event("pull_request", payload, ctx())
    assert isinstance(decision, Enqueue)
    assert decision.job.repo == "octo-org/other-repo"
    assert decision.job.dedupe_key.startswith("pr_opened:octo-org/other-repo:2:")


@pytest.mark.parametrize("association", ["NONE", "CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR"])
def test_a_strangers_pull_request_is_not_auto_reviewed(association: str) -> None:
    pr = pull_request(author=user("stranger", 77))
    pr["author_association"] = association
    payload = pull_request_event("opened", pr)
    assert classify_event("pull_request", payload, ctx()) == Ignore(
        "author_not_allowed", "stranger")
    # Listed by login, or an association the operator allows: reviewed.
    decision = classify_event("pull_request", payload, ctx(allowed_users=("Stranger",)))
    assert isinstance(decision, Enqueue) and decision.job.actor_id == 77
    allowed = ctx(allowed_associations=("OWNER", "MEMBER", "COLLABORATOR", association))
    assert isinstance(classify_event("pull_request", payload, allowed), Enqueue)
    # The REST object the poller sees is judged the same way.
    assert classify_pull_request(pr, REPO, ctx()) == Ignore("author_not_allowed", "stranger")
