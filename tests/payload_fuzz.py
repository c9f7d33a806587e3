"""Hypothesis strategies for webhook payloads: GitHub's shapes with fields replaced by
arbitrary JSON (the fuzz of the receiver)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from tests import payloads as p

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
    ("pull_request", p.pull_request_event("opened", p.pull_request(draft=True))),
    ("pull_request_review_comment", p.review_comment_event("created", {
        **p.review_comment("not an issue: it is intended", author=p.user("someone", 77),
                           association="NONE", via_app=p.app(11, "other")),
        "in_reply_to_id": 7})),
    ("issue_comment", p.issue_comment_event("created", p.issue_comment("@claude review"),
                                            on_pull=False)),
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
