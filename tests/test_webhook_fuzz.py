"""Whatever a correctly signed delivery carries, the receiver never answers with a 5xx.

Hypothesis builds deliveries three ways: arbitrary JSON documents under arbitrary event
names, real GitHub payloads with one field replaced by arbitrary JSON (the shapes the
trigger rules actually walk), and arbitrary bytes under arbitrary content types. Every one
is signed with the configured secret, so each reaches the parser, the rules and the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.github.webhooks import sign
from tests import payloads as p
from tests.webhook_env import SECRET, Env, open_env

EVENTS = ("pull_request", "issue_comment", "pull_request_review_comment", "installation",
          "installation_repositories", "ping", "push", "star", "pull_request_review")
ASCII = st.characters(min_codepoint=0x21, max_codepoint=0x7E)

# Strings include lone surrogates (JSON can carry them as \ud800 escapes); numbers go past
# what a 64-bit column holds.
strings = st.text(st.characters(blacklist_categories=()), max_size=20)
edge_values = st.sampled_from([2**63, 2**64, -1, 0, True, False, None, "", "\ud800",
                               "x" * 300, 1.5, [], {}, "@claude review", "a/b"])
json_values = edge_values | st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | strings,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(strings, inner, max_size=4),
    max_leaves=12,
)

BASES: list[tuple[str, dict[str, Any]]] = [
    ("pull_request", p.pull_request_event("opened")),
    ("pull_request", p.pull_request_event("synchronize")),
    ("pull_request", p.pull_request_event("closed", p.pull_request(state="closed"))),
    ("issue_comment", p.issue_comment_event("created", p.issue_comment("@claude review"))),
    ("pull_request_review_comment",
     p.review_comment_event("created", p.review_comment("@claude describe"))),
    ("installation", {"action": "created", "installation": p.installation(),
                      "repositories": [{"full_name": "o/r"}], "sender": p.user()}),
    ("installation_repositories", {"action": "removed", "installation": p.installation(),
                                   "repositories_added": [],
                                   "repositories_removed": [{"full_name": "o/r"}]}),
]


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON document (keys and list indexes)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from paths(item, (*prefix, index))


# The fields the receiver and the trigger rules read: mutated far more often than the rest.
HOT = {("action",), ("number",), ("installation",), ("installation", "id"), ("repository",),
       ("repository", "full_name"), ("sender",), ("sender", "type"), ("pull_request",),
       ("pull_request", "number"), ("pull_request", "state"), ("pull_request", "draft"),
       ("pull_request", "merged"), ("pull_request", "head"), ("pull_request", "head", "sha"),
       ("pull_request", "user"), ("pull_request", "user", "id"), ("pull_request", "user", "type"),
       ("issue", "number"), ("issue", "pull_request"), ("comment", "id"), ("comment", "body"),
       ("comment", "user"), ("comment", "user", "id"), ("comment", "author_association"),
       ("comment", "performed_via_github_app"), ("repositories",),
       ("repositories", 0, "full_name"), ("repositories_removed", 0, "full_name")}


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    event, base = draw(st.sampled_from(BASES))
    payload = json.loads(json.dumps(base))
    for _ in range(draw(st.integers(1, 3))):
        every = list(paths(payload))
        hot = [path for path in every if path in HOT]
        where = draw(st.sampled_from(hot) if hot and draw(st.booleans())
                     else st.sampled_from(every))
        target = payload
        for step in where[:-1]:
            target = target[step]
        target[where[-1]] = draw(json_values)
    return event, payload


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[str, bytes, str]:
    """(event, body, content type)."""
    kind = draw(st.sampled_from(["arbitrary", "mutated", "bytes"]))
    if kind == "bytes":
        content_type = draw(st.sampled_from([
            "application/json", "application/x-www-form-urlencoded", "text/plain", "",
            "application/json; charset=utf-8"]))
        return draw(st.sampled_from(EVENTS)), draw(st.binary(max_size=200)), content_type
    if kind == "mutated":
        event, payload = draw(mutated())
    else:
        event = draw(st.sampled_from(EVENTS) | st.text(ASCII, min_size=1, max_size=30))
        payload = draw(st.dictionaries(strings, json_values, max_size=6))
    text = json.dumps(payload)
    if draw(st.booleans()):
        return event, urlencode({"payload": text}).encode(), "application/x-www-form-urlencoded"
    return event, text.encode(), "application/json"


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal("asyncio") as running:
        yield running


@pytest.fixture(scope="module")
def env(portal: BlockingPortal, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with portal.wrap_async_context_manager(open_env(tmp_path_factory.mktemp("fuzz"))) as opened:
        yield opened


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(delivery=deliveries(), delivery_id=st.uuids() | st.text(ASCII, min_size=1, max_size=40),
       extra=st.dictionaries(st.sampled_from(["X-GitHub-Hook-ID", "User-Agent",
                                              "X-GitHub-Hook-Installation-Target-ID"]),
                             st.text(ASCII, max_size=20), max_size=3))
def test_no_correctly_signed_delivery_gets_a_5xx(
        portal: BlockingPortal, env: Env, delivery: tuple[str, bytes, str],
        delivery_id: object, extra: dict[str, str]) -> None:
    event, body, content_type = delivery
    headers = {**extra, "X-GitHub-Event": event, "X-GitHub-Delivery": str(delivery_id),
               "X-Hub-Signature-256": sign(body, SECRET)}
    if content_type:
        headers["Content-Type"] = content_type

    async def post() -> httpx.Response:
        return await env.client.post("/webhook", content=body, headers=headers)

    response = portal.call(post)

    assert response.status_code in (200, 202, 400), response.text
    if response.status_code == 202:
        assert set(response.json()) == {"delivery", "enqueued", "ignored"}
        assert env.delivery(str(delivery_id)) is not None
