"""The trigger API's edges: context checks, the reason vocabulary, unknown and broken input."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.config.schema import TriggersConfig
from service.intake.rules.classify import classify_event
from service.intake.rules.decisions import REASONS, Close, Enqueue, Ignore, TriggerContext
from tests.kit.paths import CHECKOUT
from tests.kit.thorough import examples
from tests.payloads import (
    APP_ID,
    APP_SLUG,
    issue_comment,
    issue_comment_event,
    pull_request_event,
    review_comment,
    review_comment_event,
)

DOC = CHECKOUT / "docs" / "TRIGGERS.md"


def ctx() -> TriggerContext:
    return TriggerContext(TriggersConfig(), APP_ID, APP_SLUG)


def test_context_knows_the_bot_login() -> None:
    assert ctx().bot_login == "review-agent[bot]"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"config": TriggersConfig(mention="@")}, "at least 2"),
        ({"config": TriggersConfig(mention="@my bot")}, "whitespace"),
        ({"app_id": 0}, "app_id"),
        ({"app_id": True}, "app_id"),
        ({"app_slug": ""}, "app_slug"),
        ({"app_slug": " agent"}, "app_slug"),
    ],
)
def test_context_is_checked_when_built(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"config": TriggersConfig(), "app_id": APP_ID, "app_slug": APP_SLUG}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        TriggerContext(**args)


def test_ignore_reasons_are_a_closed_vocabulary() -> None:
    for reason in REASONS:
        assert Ignore(reason).reason == reason
    assert Ignore("event:push").reason == "event:push"
    assert Ignore("action:labeled").reason == "action:labeled"
    with pytest.raises(ValueError, match="unknown ignore reason"):
        Ignore("because")


def test_every_reason_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for reason in [*REASONS, "event:", "action:"]:
        assert f"`{reason}" in text, f"docs/TRIGGERS.md does not explain {reason!r}"


@pytest.mark.parametrize(
    "event",
    ["push", "ping", "installation", "installation_repositories", "pull_request_review",
     "check_run", "issues", "status", "workflow_run", "something_new"],
)
def test_other_events_are_ignored(event: str) -> None:
    payload = pull_request_event("opened")
    assert classify_event(event, payload, ctx()) == Ignore(f"event:{event}")


def test_echoed_names_are_short_and_printable() -> None:
    decision = classify_event("x" * 500 + "\n", {}, ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "event:" + "x" * 64
    decision = classify_event("pull_request", {"action": "evil\x1b[31m"}, ctx())
    assert decision == Ignore("action:evil?[31m")


@pytest.mark.parametrize(
    ("event", "payload", "path"),
    [
        ("pull_request", [], "JSON object"),
        ("pull_request", {}, "payload.action"),
        ("pull_request", {"action": 3}, "payload.action"),
        ("pull_request", {"action": "opened"}, "payload.repository"),
        ("pull_request", {"action": "opened", "repository": {"full_name": "a"}},
         "repository.full_name"),
        ("pull_request", {"action": "opened", "repository": {"full_name": "a/b"}},
         "payload.pull_request"),
        ("pull_request", {"action": "closed", "repository": {"full_name": "a/b"},
                          "pull_request": {"number": 1, "merged": "no"}}, "pull_request.merged"),
        ("issue_comment", {"action": "created", "repository": {"full_name": "a/b"}},
         "payload.issue"),
        ("issue_comment", {"action": "created", "repository": {"full_name": "a/b"},
                           "issue": {"pull_request": {}}, "comment": {}}, "issue.number"),
        ("pull_request_review_comment", {"action": "created",
                                         "repository": {"full_name": "a/b"},
                                         "pull_request": {"number": 1}, "comment": {"id": 1,
                                         "body": 7}}, "comment.body"),
    ],
)
def test_malformed_payloads_are_ignored_with_the_path(event: str, payload: Any, path: str) -> None:
    decision = classify_event(event, payload, ctx())
    assert isinstance(decision, Ignore)
    assert decision.reason == "malformed_payload"
    assert path in decision.detail


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner,
                                                                 max_size=4),
    max_leaves=20,
)
_EVENTS = st.sampled_from(["pull_request", "issue_comment", "pull_request_review_comment",
                           "push", ""])
_KEYS = st.sampled_from(["action", "issue", "comment", "pull_request", "repository", "sender",
                         "number", "installation"])


@given(_EVENTS, st.dictionaries(_KEYS, _JSON, max_size=6) | _JSON)
@settings(max_examples=examples(400))
def test_classify_event_never_raises_on_arbitrary_json(event: str, payload: Any) -> None:
    assert isinstance(classify_event(event, payload, ctx()), Enqueue | Close | Ignore)


def _valid_payloads() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("pull_request", pull_request_event("opened")),
        ("pull_request", pull_request_event("synchronize")),
        ("pull_request", pull_request_event("closed")),
        ("issue_comment", issue_comment_event("created", issue_comment("@claude describe"))),
        ("pull_request_review_comment",
         review_comment_event("created", review_comment("@claude"))),
    ]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found: list[tuple[Any, ...]] = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, child in value.items():
            found.extend(_paths(child, (*prefix, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found.extend(_paths(child, (*prefix, index)))
    return found


@given(st.data())
@settings(max_examples=examples(400))
def test_classify_event_never_raises_on_mutated_payloads(data: st.DataObject) -> None:
    event, payload = data.draw(st.sampled_from(_valid_payloads()))
    payload = copy.deepcopy(payload)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(payload)))
        parent: Any = payload
        for step in path[:-1]:
            parent = parent[step]
        if isinstance(parent, dict) and data.draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = data.draw(_JSON)
        if not _paths(payload):
            break
    decision = classify_event(event, payload, ctx())
    assert isinstance(decision, Enqueue | Close | Ignore)
    if isinstance(decision, Enqueue):
        # Whatever survived the mutation, an enqueued job is well formed.
        assert re.fullmatch(r"(pr_opened|mention):[^/:]+/[^/:]+:\d+:\w+", decision.job.dedupe_key)
