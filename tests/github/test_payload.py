"""GitHub's JSON read field by field: each reader takes what GitHub sends, and a missing or
mistyped field is a ``PayloadError`` naming its path and the JSON type — never the value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from service.github import payload as f
from service.github.payload import PayloadError

OBJ: dict[str, Any] = {
    "pull_request": {"number": 7, "title": "", "draft": True, "body": None,
                     "head": {"sha": "a" * 40}, "merged_by": None},
    "secret": "ghs_" + "x" * 36,
    "zero": 0, "yes": True, "when": "2026-06-01T12:00:00Z", "local": "2026-06-01T14:00:00+02:00",
}


def test_each_reader_takes_what_github_sends() -> None:
    pr = f.mapping(OBJ, "pull_request", "payload")
    assert f.positive_int(pr, "number", "pull_request") == 7
    assert f.text(pr, "title", "pull_request") == ""  # present, possibly empty
    assert f.optional_string(pr, "body", "pull_request") == ""  # null: empty
    assert f.optional_string(pr, "missing", "pull_request") == ""
    assert f.flag(pr, "draft", "pull_request") is True
    assert f.flag(pr, "missing", "pull_request") is False
    assert f.optional_mapping(pr, "merged_by", "pull_request") is None
    assert f.string(f.mapping(pr, "head", "pull_request"), "sha", "pull_request.head") == (
        "a" * 40)
    assert f.repo_name("acme/widgets.js", "repository.full_name") == "acme/widgets.js"


@pytest.mark.parametrize(("read", "message"), [
    (lambda: f.mapping(OBJ, "secret", "payload"),
     "payload.secret: expected an object, got a string"),
    (lambda: f.positive_int(OBJ, "zero", "payload"),
     "payload.zero: expected a positive integer, got the number 0"),
    (lambda: f.positive_int(OBJ, "yes", "payload"),  # true is never an id
     "payload.yes: expected a positive integer, got a boolean"),
    (lambda: f.string(OBJ["pull_request"], "title", "pull_request"),
     "pull_request.title: expected a non-empty string, got an empty string"),
    (lambda: f.text(OBJ, "missing", "payload"),
     "payload.missing: expected a string, got null or nothing"),
    (lambda: f.flag(OBJ, "secret", "payload"),
     "payload.secret: expected a boolean, got a string"),
    (lambda: f.optional_mapping(OBJ, "zero", "payload"),
     "payload.zero: expected an object or null, got the number 0"),
    (lambda: f.repo_name(["acme", "widgets"], "repository.full_name"),
     "repository.full_name: expected 'owner/name', got an array"),
    (lambda: f.repo_name("acme/wid:gets", "repository.full_name"),
     "repository.full_name: expected 'owner/name', got 'acme/wid:gets'"),
])
def test_a_wrong_field_names_its_path_and_type(read: Any, message: str) -> None:
    with pytest.raises(PayloadError) as raised:
        read()
    assert str(raised.value) == message
    assert "ghs_" not in str(raised.value)  # the value itself is never echoed


def test_kind_names_every_json_type() -> None:
    assert [f.kind(v) for v in (None, True, 3, 1.5, "", "x", {}, [])] == [
        "null or nothing", "a boolean", "the number 3", "a number", "an empty string",
        "a string", "an object", "an array"]


def test_timestamps_are_aware_utc_and_need_a_zone() -> None:
    expected = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert f.github_time(OBJ, "when", "pull_request") == expected
    local = f.github_time(OBJ, "local", "pull_request")
    assert local == expected and local.tzinfo == UTC
    assert local.utcoffset() == timedelta(0)
    for bad, why in (({"t": "2026-06-01T12:00:00"}, "without a zone"),
                     ({"t": "yesterday"}, "not an ISO-8601 timestamp"),
                     ({"t": 1717243200}, "expected an ISO-8601 timestamp")):
        with pytest.raises(PayloadError, match=why):
            f.github_time(bad, "t", "comment")
