"""Committable suggestions: replacement code a finding proposes, offered as GitHub's
```suggestion block when the comment is anchored on the lines it replaces, shown as text
otherwise, with the trigger phrase neutralised inside it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from service.engine.findings import InvalidAnswer, parse_answer_text, review_schema
from service.publish import compose
from service.publish.run_content import encode_findings, parse_findings
from tests.publisher_rig import (
    ANCHORED,
    UNANCHORED,
    Rig,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)


def answer(**finding: object) -> str:
    base = {"path": "src/app.py", "line": 3, "side": "RIGHT", "start_line": 2,
            "severity": "major", "category": "correctness", "title": "t", "body": "b"}
    return json.dumps({"summary": "s", "risk": "low", "findings": [{**base, **finding}]})


def test_the_engine_may_propose_replacement_code_for_the_new_version() -> None:
    assert "suggestion" in review_schema("full")["properties"]["findings"]["items"][
        "properties"]
    (f,) = parse_answer_text("review", "full", answer(suggestion="import json\r\n")).findings
    assert f.suggestion == "import json"
    (left,) = parse_answer_text("review", "full", answer(side="LEFT", suggestion="x")).findings
    assert left.suggestion is None  # only the new version can be replaced
    (long,) = parse_answer_text("review", "full", answer(suggestion="x" * 5001)).findings
    assert long.suggestion is None  # never cut: a cut suggestion commits broken code
    (empty,) = parse_answer_text("review", "full", answer(suggestion="")).findings
    assert empty.suggestion == ""  # deleting the lines is a suggestion too
    with pytest.raises(InvalidAnswer, match="suggestion: must be a string or null"):
        parse_answer_text("review", "full", answer(suggestion=["x"]))
    (kept,) = parse_findings(encode_findings([replace(ANCHORED, suggestion="a = 1")]))
    assert kept.suggestion == "a = 1"


def test_an_anchored_suggestion_is_committable_and_cannot_trigger() -> None:
    finding = replace(ANCHORED, suggestion="x = '``` @claude review'")
    body = str(compose.inline_comment(finding, "@claude")["body"])
    assert "\n````suggestion\nx = '```" in body and body.endswith("\n````")
    assert "@claude review" not in body
    plain = compose.inline_comment(ANCHORED, "@claude")
    assert "suggestion" not in str(plain["body"])


def test_a_suggestion_that_cannot_be_anchored_goes_as_text() -> None:
    finding = replace(UNANCHORED, suggestion="def helper():\n    return 1")
    entry = compose.findings_section((finding,), "Findings", "@claude", 10_000)
    assert "Suggested replacement for line 12:" in entry
    assert "```suggestion" not in entry and "```\ndef helper():\n    return 1\n```" in entry


@pytest.mark.anyio
async def test_the_posted_review_offers_the_suggestion_on_the_diff(rig: Rig) -> None:
    pr = rig.add_pull()
    anchored = replace(ANCHORED, suggestion="import json")
    outside = replace(UNANCHORED, suggestion="def helper(): ...")
    run = rig.record(rig.ask(pr), findings=(anchored, outside))
    result = await rig.publisher().publish_key(run.dedupe_key)
    assert result.status == "published"
    (comment,) = rig.inline(pr)
    assert "```suggestion\nimport json\n```" in comment.body
    (review,) = rig.reviews(pr)
    assert "Suggested replacement for line 12:" in review.body
    assert "```suggestion" not in review.body
