"""The skim (``service.webhook.skim``): a payload read to the fields the App reads.

Two properties make it safe to stand in for a full parse:

- **complete**: ``FIELDS`` names every field the rules (``classify_event``) and the
  delivery's log line and columns read. The rules run over full payloads wrapped to record
  each read, for GitHub's shapes, mutated, under several trigger settings; any read
  outside ``FIELDS`` fails;
- **exact**: whenever the skim reads a body, it gives the full parse's payload pruned to
  ``FIELDS`` -- so the rules decide the same -- and it leaves to the full parse whatever it
  cannot read that way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.config import TriggersConfig
from service.github.webhooks import parse_body
from service.repo_config.merge import RepoTriggers
from service.triggers import TriggerContext, classify_event
from service.webhook.deliveries import Delivery, Received
from service.webhook.skim import FIELDS, WHOLE_EVENTS, skim, skim_body, tree
from tests import payloads as p
from tests.payload_fuzz import BASES, json_values, mutated

TREE = tree(FIELDS)
SKIMMED = [(event, payload) for event, payload in BASES if event not in WHOLE_EVENTS]
NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)

CONTEXTS = [
    TriggerContext(TriggersConfig(), p.APP_ID, p.APP_SLUG,
                   decline_phrases=("not an issue",)),
    TriggerContext(TriggersConfig(allowed_associations=(), allowed_users=("someone",)),
                   p.APP_ID, p.APP_SLUG, decline_phrases=("not an issue",),
                   repo_triggers=lambda repo: RepoTriggers(auto_review=True, on_push=True,
                                                           drafts=True)),
    TriggerContext(TriggersConfig(auto_review=False), 11, "other"),
]


class Recording(Mapping[str, Any]):
    """A payload object that notes the path of every field read through it."""

    def __init__(self, data: dict[str, Any], reads: set[tuple[str, ...]],
                 path: tuple[str, ...] = ()) -> None:
        self._data, self._reads, self._path = data, reads, path

    def _read(self, key: str) -> tuple[str, ...]:
        path = (*self._path, key)
        self._reads.add(path)
        return path

    def _wrap(self, path: tuple[str, ...], value: Any) -> Any:
        return Recording(value, self._reads, path) if isinstance(value, dict) else value

    def __getitem__(self, key: str) -> Any:
        return self._wrap(self._read(key), self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        path = self._read(key)
        return self._wrap(path, self._data[key]) if key in self._data else default

    def __contains__(self, key: object) -> bool:
        self._read(str(key))
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        self._read("*")  # every key: only a field kept whole may be walked
        return iter(self._data)

    def __len__(self) -> int:
        self._read("*")
        return len(self._data)


def covered(path: tuple[str, ...]) -> bool:
    node: Any = TREE
    for key in path:
        if node is None:
            return True  # under a field kept whole
        if key not in node:
            return False
        node = node[key]
    return True


def reads_of(event: str, payload: dict[str, Any]) -> set[tuple[str, ...]]:
    """The paths the rules and the delivery's log line and columns read in ``payload``."""
    reads: set[tuple[str, ...]] = set()
    recording = Recording(payload, reads)
    for ctx in CONTEXTS:
        classify_event(event, recording, ctx)
    delivery = Delivery("d-1", event, recording, NOW)
    delivery.log_fields()
    assert delivery.action == delivery.log_fields()["action"]
    return reads


def prune(value: Any, node: Any) -> Any:
    if node is None or not isinstance(value, dict):
        return value
    return {key: prune(value[key], child) for key, child in node.items() if key in value}


def as_orjson_reads(value: Any) -> Any:
    """orjson reads an integer outside 64 bits as a float; the skim keeps the integer."""
    if isinstance(value, dict):
        return {key: as_orjson_reads(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_orjson_reads(item) for item in value]
    if isinstance(value, int) and not isinstance(value, bool) and not (
            -(2**63) <= value < 2**64):
        return float(value)
    return value


# -- complete -------------------------------------------------------------------------------


@pytest.mark.parametrize(("event", "payload"), SKIMMED)
def test_every_field_read_from_githubs_shapes_is_skimmed(event: str,
                                                         payload: dict[str, Any]) -> None:
    reads = reads_of(event, json.loads(json.dumps(payload)))

    assert {path for path in reads if not covered(path)} == set()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_every_field_read_from_a_mutated_payload_is_skimmed(
        delivery: tuple[str, dict[str, Any]]) -> None:
    event, payload = delivery
    if event not in WHOLE_EVENTS:
        assert {path for path in reads_of(event, payload) if not covered(path)} == set()


def test_the_recording_sees_a_read_outside_the_fields() -> None:
    # The check above can fail: a read the skim would not carry is caught.
    reads: set[tuple[str, ...]] = set()
    Recording({"pull_request": {"title": "t"}}, reads)["pull_request"].get("title")

    assert ("pull_request", "title") in reads and not covered(("pull_request", "title"))


# -- exact ----------------------------------------------------------------------------------


def check_exact(event: str, body: bytes) -> None:
    full = parse_body(body, "application/json")
    skimmed = skim(body)
    assert skimmed is not None, "a payload in GitHub's shape is skimmed"
    assert as_orjson_reads(skimmed) == as_orjson_reads(prune(full, TREE))
    for ctx in CONTEXTS:
        assert classify_event(event, skimmed, ctx) == classify_event(event, prune(full, TREE),
                                                                    ctx)


@pytest.mark.parametrize(("event", "payload"), SKIMMED)
def test_a_skimmed_payload_is_the_full_one_pruned(event: str, payload: dict[str, Any]) -> None:
    check_exact(event, json.dumps(payload, indent=2).encode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_payload_is_skimmed_exactly_or_parsed_whole(
        delivery: tuple[str, dict[str, Any]]) -> None:
    event, payload = delivery
    body = json.dumps(payload).encode()
    skimmed = skim(body)
    if skimmed is not None:
        assert as_orjson_reads(skimmed) == as_orjson_reads(
            prune(parse_body(body, "application/json"), TREE))
    parsed = Received("d-1", event, body, "application/json", NOW).parse().payload
    full = parse_body(body, "application/json")
    for ctx in CONTEXTS:
        assert classify_event(event, as_orjson_reads(parsed), ctx) == classify_event(
            event, as_orjson_reads(full), ctx)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["action", "number", "sender", "pull_request",
                                        "installation", "zen"]), json_values, max_size=5))
def test_any_object_is_skimmed_exactly_or_parsed_whole(document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    skimmed = skim(body)
    if skimmed is not None:
        assert as_orjson_reads(skimmed) == as_orjson_reads(
            prune(parse_body(body, "application/json"), TREE))


@pytest.mark.parametrize(("name", "body"), [
    ("not JSON", b"{not json"),
    ("an array", b"[1, 2]"),
    ("not UTF-8 in a field never read", b'{"action": "opened", "zen": "\xff"}'),
    ("a lone surrogate", b'{"action": "\\ud800"}'),
    ("NaN", b'{"action": "opened", "number": NaN}'),
    ("a string where an object goes", b'{"pull_request": "x"}'),
    ("an object where a string goes, under an object", b'{"sender": []}'),
    ("a byte-order mark", b'\xef\xbb\xbf{"action": "opened"}'),
])
def test_what_the_skim_cannot_read_exactly_is_left_to_the_full_parse(name: str,
                                                                     body: bytes) -> None:
    assert skim(body) is None, name


def test_fields_never_read_are_not_built() -> None:
    payload = p.pull_request_event("opened")
    skimmed = skim(json.dumps(payload).encode())

    assert skimmed is not None
    assert set(skimmed["pull_request"]) <= {"number", "state", "merged", "merged_at", "draft",
                                            "author_association", "head", "user"}
    assert skimmed["pull_request"]["head"] == {"sha": p.HEAD_SHA}
    assert "body" not in skimmed["pull_request"] and "base" not in skimmed["pull_request"]


@pytest.mark.parametrize(("event", "content_type", "skimmed"), [
    ("pull_request", "application/json", True),
    ("pull_request", None, True),
    ("pull_request", "application/json; charset=utf-8", True),
    ("pull_request", "application/x-www-form-urlencoded", False),
    ("installation", "application/json", False),
    ("installation_repositories", "application/json", False),
])
def test_which_deliveries_are_skimmed(event: str, content_type: str | None,
                                      skimmed: bool) -> None:
    body = json.dumps({"action": "opened", "repositories": [{"full_name": "o/r"}]}).encode()

    assert (skim_body(event, body, content_type) is not None) is skimmed


def test_the_tree_keeps_a_field_whole_over_its_parts() -> None:
    assert tree(["a.b", "a.b.c", "d.e.f", "d"]) == {"a": {"b": None}, "d": None}
    assert tree(["a.b.c", "a.b"]) == {"a": {"b": None}}
