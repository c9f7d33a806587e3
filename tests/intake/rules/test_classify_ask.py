"""Questions: ``@claude ask`` anywhere, and any use of the phrase in a reply on one of the
App's own review threads (the rule consults ``agent_comments`` for the thread's root)."""

from __future__ import annotations

from typing import Any

import pytest

from service.config.schema import TriggersConfig
from service.intake.rules.classify import classify_comment
from service.intake.rules.decisions import Enqueue, Ignore, TriggerContext

REPO = "acme/widgets"
FINDING = 41  # the root of a thread the App started: one of its inline findings
CTX = TriggerContext(config=TriggersConfig(), app_id=77, app_slug="pr-reviewer",
                     agent_comments=frozenset({FINDING}), decline_phrases=("won't fix",))


def comment(body: str, *, reply_to: int | None = None, association: str = "MEMBER",
            login: str = "bob", user_type: str = "User") -> dict[str, Any]:
    obj: dict[str, Any] = {"id": 99, "body": body, "author_association": association,
                           "user": {"login": login, "id": 7, "type": user_type}}
    if reply_to is not None:
        obj["in_reply_to_id"] = reply_to
    return obj


def command(obj: dict[str, Any], source: str = "review") -> str:
    decision = classify_comment(obj, source, REPO, 3, CTX)  # type: ignore[arg-type]
    assert isinstance(decision, Enqueue), decision
    assert decision.job.dedupe_key == f"mention:{REPO}:3:99"
    return decision.job.command


@pytest.mark.parametrize(("body", "expected"), [
    ("Why is this a problem, @claude?", "ask"),
    ("@claude does this also apply to `parse`?", "ask"),  # any other word: a question
    ("@claude ask does this also apply to `parse`?", "ask"),
    ("@claude review", "review"),  # a command written out is that command
    ("@claude please describe", "describe"),
])
def test_on_the_apps_thread_the_phrase_asks_about_the_finding(body: str,
                                                               expected: str) -> None:
    assert command(comment(body, reply_to=FINDING)) == expected


@pytest.mark.parametrize(("body", "source", "reply_to", "expected"), [
    ("@claude ask what does this guard against?", "issue", None, "ask"),
    ("@claude ask why here?", "review", None, "ask"),  # a diff comment of its own
    ("@claude ask why here?", "review", 12, "ask"),   # someone else's thread
    ("@claude why here?", "review", 12, "review"),    # there, a bare mention is a review
    ("@claude what about this?", "issue", None, "review"),  # unchanged in the conversation
])
def test_ask_is_a_command_everywhere(body: str, source: str, reply_to: int | None,
                                     expected: str) -> None:
    assert command(comment(body, reply_to=reply_to), source) == expected


def test_a_reply_on_the_apps_thread_without_the_phrase_is_nothing() -> None:
    assert classify_comment(comment("thanks!", reply_to=FINDING), "review", REPO, 3, CTX) == (
        Ignore("no_mention"))


@pytest.mark.parametrize(("obj", "reason"), [
    (comment("@claude ask why?", association="NONE", login="stranger"),
     Ignore("author_not_allowed", "stranger (NONE)")),
    (comment("why, @claude?", reply_to=FINDING, association="CONTRIBUTOR", login="drive-by"),
     Ignore("author_not_allowed", "drive-by (CONTRIBUTOR)")),
    (comment("@claude ask why?", login="helper[bot]", user_type="Bot"),
     Ignore("bot_author", "helper[bot]")),
])
def test_who_may_ask_is_who_may_trigger(obj: dict[str, Any], reason: Ignore) -> None:
    assert classify_comment(obj, "review", REPO, 3, CTX) == reason


def test_an_edited_question_is_never_asked() -> None:
    assert classify_comment(comment("@claude ask why?"), "issue", REPO, 3, CTX,
                            edited=True) == Ignore("comment_edited")
