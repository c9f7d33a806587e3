"""issue_comment and pull_request_review_comment: mentions, who may ask, self-loops."""

from __future__ import annotations

from typing import Any

import pytest

from service.config.schema import TriggersConfig
from service.github.payload import PayloadError
from service.intake.rules.classify import classify_comment, classify_event, pull_request_number
from service.intake.rules.decisions import Enqueue, Ignore, TriggerContext
from service.intake.rules.mention import neutralise
from service.model.jobs import Job
from tests.payloads import (
    APP_ID,
    APP_SLUG,
    app,
    bot_user,
    issue_comment,
    issue_comment_event,
    review_comment,
    review_comment_event,
    user,
)

REPO = "Codertocat/Hello-World"
AUTHOR_ID = 21031067
ISSUE_ID = 492700400
REVIEW_ID = 284312630


def ctx(agent_comments: Any = frozenset(), **triggers: object) -> TriggerContext:
    config = TriggersConfig(**triggers)  # type: ignore[arg-type]
    return TriggerContext(config, APP_ID, APP_SLUG, agent_comments)


def issue_event(body: str, action: str = "created", **kwargs: Any) -> dict[str, Any]:
    comment_keys = ("comment_id", "author", "association", "via_app", "on_pull")
    comment = issue_comment(body, **{k: v for k, v in kwargs.items() if k in comment_keys})
    event_keys = ("on_pull", "sender", "old_body")
    return issue_comment_event(action, comment, **{k: v for k, v in kwargs.items()
                                                   if k in event_keys})


def review_event(body: str, action: str = "created", **kwargs: Any) -> dict[str, Any]:
    comment_keys = ("comment_id", "author", "association", "via_app")
    comment = review_comment(body, **{k: v for k, v in kwargs.items() if k in comment_keys})
    event_keys = ("sender", "old_body")
    return review_comment_event(action, comment, **{k: v for k, v in kwargs.items()
                                                    if k in event_keys})


def mention_job(source: str = "issue", command: str = "review") -> Job:
    return Job(kind="mention", repo=REPO, pr_number=2, actor_id=AUTHOR_ID,
               comment_id=ISSUE_ID if source == "issue" else REVIEW_ID,
               comment_source=source, command=command)  # type: ignore[arg-type]


# --- what triggers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "command"),
    [("@claude", "review"), ("@claude review", "review"), ("@claude describe", "describe"),
     ("Could you take a look, @claude?", "review"), ("@claude please describe", "describe")],
)
def test_conversation_comment_mention(body: str, command: str) -> None:
    decision = classify_event("issue_comment", issue_event(body), ctx())
    assert decision == Enqueue(mention_job("issue", command))
    assert isinstance(decision, Enqueue)
    assert decision.job.dedupe_key == f"mention:{REPO}:2:{ISSUE_ID}"
    assert decision.job.head_sha is None


@pytest.mark.parametrize(
    ("body", "command"), [("@claude", "review"), ("@claude describe", "describe")]
)
def test_diff_comment_mention(body: str, command: str) -> None:
    decision = classify_event("pull_request_review_comment", review_event(body), ctx())
    assert decision == Enqueue(mention_job("review", command))
    assert isinstance(decision, Enqueue)
    assert decision.job.dedupe_key == f"mention:{REPO}:2:{REVIEW_ID}"


def test_custom_phrase_from_config() -> None:
    config = ctx(mention="@review-agent")
    assert classify_event("issue_comment", issue_event("@review-agent describe"), config) == (
        Enqueue(mention_job("issue", "describe"))
    )
    assert classify_event("issue_comment", issue_event("@claude describe"), config) == (
        Ignore("no_mention")
    )


# --- what does not -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    ["looks good to me", "> @claude review\n\nI agree with that", "```\n@claude review\n```",
     "use `@claude review` to ask", "intro\n\n    @claude review", "mail me@claude.ai",
     "@claudette review", "", neutralise("@claude review", "@claude")],
    ids=["plain", "quoted", "fenced", "inline-code", "indented-code", "email", "longer-name",
         "empty", "neutralised"],
)
def test_no_mention(body: str) -> None:
    assert classify_event("issue_comment", issue_event(body), ctx()) == Ignore("no_mention")
    assert classify_event("pull_request_review_comment", review_event(body), ctx()) == (
        Ignore("no_mention")
    )


def test_null_body_is_no_mention() -> None:
    payload = issue_event("x")
    payload["comment"]["body"] = None
    assert classify_event("issue_comment", payload, ctx()) == Ignore("no_mention")


def test_plain_issue_is_not_a_pull_request() -> None:
    payload = issue_event("@claude review", on_pull=False)
    assert "pull_request" not in payload["issue"]
    assert classify_event("issue_comment", payload, ctx()) == Ignore("not_a_pull_request")


@pytest.mark.parametrize("event", ["issue_comment", "pull_request_review_comment"])
def test_edited_comment_never_triggers(event: str) -> None:
    build = issue_event if event == "issue_comment" else review_event
    # Neither the new text nor the old text (changes.body.from) counts.
    payload = build("@claude review", "edited", old_body="@claude describe")
    assert classify_event(event, payload, ctx()) == Ignore("comment_edited")
    payload = build("nothing", "edited", old_body="@claude describe")
    assert classify_event(event, payload, ctx()) == Ignore("comment_edited")


@pytest.mark.parametrize("event", ["issue_comment", "pull_request_review_comment"])
def test_deleted_comment_never_triggers(event: str) -> None:
    build = issue_event if event == "issue_comment" else review_event
    assert classify_event(event, build("@claude review", "deleted"), ctx()) == (
        Ignore("comment_deleted")
    )


@pytest.mark.parametrize("action", ["pinned", "unpinned", "resolved"])
def test_other_comment_actions(action: str) -> None:
    assert classify_event("issue_comment", issue_event("@claude", action), ctx()) == (
        Ignore(f"action:{action}")
    )


# --- who may ask -------------------------------------------------------------------------


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR"])
def test_default_associations_are_allowed(association: str) -> None:
    decision = classify_event("issue_comment", issue_event("@claude", association=association),
                              ctx())
    assert isinstance(decision, Enqueue)


@pytest.mark.parametrize(
    "association", ["CONTRIBUTOR", "FIRST_TIME_CONTRIBUTOR", "FIRST_TIMER", "NONE", "MANNEQUIN"]
)
def test_other_associations_are_not_allowed(association: str) -> None:
    payload = issue_event("@claude review", association=association,
                          author=user("stranger", 555))
    decision = classify_event("issue_comment", payload, ctx())
    assert decision == Ignore("author_not_allowed", f"stranger ({association})")


def test_not_allowed_without_a_mention_is_just_no_mention() -> None:
    payload = issue_event("drive-by comment", association="NONE")
    assert classify_event("issue_comment", payload, ctx()) == Ignore("no_mention")


def test_allowed_users_override_association() -> None:
    payload = issue_event("@claude describe", association="CONTRIBUTOR",
                          author=user("Alice-Dev", 777))
    assert classify_event("issue_comment", payload, ctx()).reason == "author_not_allowed"  # type: ignore[union-attr]
    decision = classify_event("issue_comment", payload, ctx(allowed_users=("alice-dev",)))
    assert isinstance(decision, Enqueue)
    assert decision.job.actor_id == 777
    assert decision.job.command == "describe"


def test_allowed_associations_are_configurable_and_case_insensitive() -> None:
    payload = issue_event("@claude", association="CONTRIBUTOR")
    assert isinstance(classify_event("issue_comment", payload, ctx(
        allowed_associations=("contributor",))), Enqueue)
    owner = issue_event("@claude", association="OWNER")
    assert classify_event("issue_comment", owner, ctx(allowed_associations=("MEMBER",))) == (
        Ignore("author_not_allowed", "Codertocat (OWNER)")
    )


def test_ghost_author_is_not_allowed() -> None:
    payload = issue_event("@claude")
    payload["comment"]["user"] = None
    payload["sender"] = user("ghost", 10137)
    decision = classify_event("issue_comment", payload, ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "author_not_allowed"


# --- bots and the App itself ---------------------------------------------------------------


@pytest.mark.parametrize("event", ["issue_comment", "pull_request_review_comment"])
def test_bots_never_trigger(event: str) -> None:
    build = issue_event if event == "issue_comment" else review_event
    payload = build("@claude review", association="MEMBER", author=bot_user("renovate", 2))
    assert classify_event(event, payload, ctx()) == Ignore("bot_author", "renovate[bot]")
    # Not even when the bot is listed by name.
    listed = ctx(allowed_users=("renovate[bot]",))
    assert classify_event(event, payload, listed) == Ignore("bot_author", "renovate[bot]")
    # A "[bot]" login with a User type is still a bot.
    payload = build("@claude review", author=user("helper[bot]", 3, "User"))
    assert classify_event(event, payload, ctx()).reason == "bot_author"  # type: ignore[union-attr]


@pytest.mark.parametrize("event", ["issue_comment", "pull_request_review_comment"])
def test_own_app_by_login(event: str) -> None:
    build = issue_event if event == "issue_comment" else review_event
    own = bot_user(APP_SLUG, 9000)
    decision = classify_event(event, build("@claude review", author=own), ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "own_app"
    # Logins compare case-insensitively.
    shouting = user(f"{APP_SLUG.upper()}[BOT]", 9000, "Bot")
    assert classify_event(event, build("@claude", author=shouting), ctx()).reason == "own_app"  # type: ignore[union-attr]


@pytest.mark.parametrize("event", ["issue_comment", "pull_request_review_comment"])
def test_own_app_by_performed_via_github_app(event: str) -> None:
    build = issue_event if event == "issue_comment" else review_event
    # Written through a user's token, so the author looks human and allowed.
    payload = build("@claude review", via_app=app(APP_ID))
    decision = classify_event(event, payload, ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "own_app"
    # Another App acting for a person is not us: the person's mention counts.
    payload = build("@claude review", via_app=app(APP_ID + 1, "other-app"))
    assert isinstance(classify_event(event, payload, ctx()), Enqueue)


@pytest.mark.parametrize("event", ["issue_comment", "pull_request_review_comment"])
def test_own_comment_by_recorded_id(event: str) -> None:
    build = issue_event if event == "issue_comment" else review_event
    comment_id = ISSUE_ID if event == "issue_comment" else REVIEW_ID
    payload = build("@claude review")
    ignored = Ignore("own_comment", str(comment_id))
    assert classify_event(event, payload, ctx({comment_id})) == ignored
    # A predicate works as well as a set.
    assert classify_event(event, payload, ctx(lambda cid: cid == comment_id)) == (
        Ignore("own_comment", str(comment_id))
    )
    assert isinstance(classify_event(event, payload, ctx({comment_id + 1})), Enqueue)


def test_sender_is_checked_too() -> None:
    payload = issue_event("@claude review", sender=bot_user(APP_SLUG, 9000))
    assert classify_event("issue_comment", payload, ctx()) == Ignore("own_app", "sender")
    payload = issue_event("@claude review", sender=bot_user("github-actions", 41898282))
    assert classify_event("issue_comment", payload, ctx()) == (
        Ignore("bot_author", "github-actions[bot]")
    )


def test_agent_reply_quoting_a_request_does_not_loop() -> None:
    # The agent's reply quotes the request and names the phrase; it is neutralised before
    # posting. Even with no other sign, the text itself cannot trigger.
    reply = neutralise("> @claude describe\n\nHere is the description. Ask @claude review "
                       "for a review.", "@claude")
    payload = issue_event(reply, author=user("operator", 1), association="OWNER")
    assert classify_event("issue_comment", payload, ctx()) == Ignore("no_mention")


# --- REST objects: the poller's path ------------------------------------------------------


def test_rest_conversation_comment_gives_the_webhooks_job() -> None:
    comment = issue_comment("@claude describe")
    webhook = classify_event("issue_comment", issue_comment_event("created", comment), ctx())
    number = pull_request_number(comment, "issue")
    assert number == 2
    polled = classify_comment(comment, "issue", REPO, number, ctx())
    assert polled == webhook
    assert isinstance(polled, Enqueue)
    assert isinstance(webhook, Enqueue)
    assert polled.job.dedupe_key == webhook.job.dedupe_key == f"mention:{REPO}:2:{ISSUE_ID}"


def test_rest_diff_comment_gives_the_webhooks_job() -> None:
    comment = review_comment("@claude")
    webhook = classify_event("pull_request_review_comment",
                             review_comment_event("created", comment), ctx())
    polled = classify_comment(comment, "review", REPO, pull_request_number(comment, "review"),
                              ctx())
    assert polled == webhook == Enqueue(mention_job("review"))


def test_rest_plain_issue_comment() -> None:
    comment = issue_comment("@claude review", on_pull=False)
    assert pull_request_number(comment, "issue") is None
    assert classify_comment(comment, "issue", REPO, None, ctx()) == Ignore("not_a_pull_request")


def test_rest_edited_comment() -> None:
    comment = issue_comment("@claude review")
    assert classify_comment(comment, "issue", REPO, 2, ctx(), edited=True) == (
        Ignore("comment_edited")
    )


def test_pull_request_number_parses_ghes_urls() -> None:
    comment = issue_comment("x")
    comment["html_url"] = "https://ghe.example.com/octo/repo/pull/15#issuecomment-1"
    assert pull_request_number(comment, "issue") == 15
    comment["html_url"] = "https://ghe.example.com/octo/repo/issues/15#issuecomment-1"
    assert pull_request_number(comment, "issue") is None
    diff = review_comment("x")
    diff["pull_request_url"] = "https://ghe.example.com/api/v3/repos/octo/repo/pulls/15"
    assert pull_request_number(diff, "review") == 15


def test_pull_request_number_rejects_garbage() -> None:
    comment = issue_comment("x")
    comment["html_url"] = "https://github.com/octo/repo/discussions/3"
    with pytest.raises(PayloadError, match=r"comment\.html_url"):
        pull_request_number(comment, "issue")
    diff = review_comment("x")
    del diff["pull_request_url"]
    with pytest.raises(PayloadError, match=r"comment\.pull_request_url"):
        pull_request_number(diff, "review")
    with pytest.raises(ValueError, match="source"):
        pull_request_number(comment, "commit")  # type: ignore[arg-type]


def test_classify_comment_checks_its_arguments() -> None:
    comment = issue_comment("@claude")
    with pytest.raises(ValueError, match="source"):
        classify_comment(comment, "commit", REPO, 2, ctx())  # type: ignore[arg-type]
    with pytest.raises(PayloadError, match="pr_number"):
        classify_comment(comment, "issue", REPO, 0, ctx())
    with pytest.raises(PayloadError, match="owner/name"):
        classify_comment(comment, "issue", "nope", 2, ctx())
    del comment["id"]
    with pytest.raises(PayloadError, match=r"comment\.id"):
        classify_comment(comment, "issue", REPO, 2, ctx())
