"""The findings schema and answer validation (pure)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.engine.findings import (
    MAX_FINDINGS,
    InvalidAnswer,
    ask_schema,
    describe_schema,
    extract_json,
    parse_answer,
    parse_answer_text,
    review_schema,
)
from tests.engine.questions import ANSWER as ASKED


def finding(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"path": "src/a.py", "line": 3, "side": "RIGHT", "start_line": None,
                            "severity": "major", "category": "correctness",
                            "title": "Off by one", "body": "The loop skips the last item."}
    base.update(overrides)
    return base


def review(*findings: dict[str, Any]) -> dict[str, Any]:
    return {"summary": "Looks mostly right.", "risk": "low", "findings": list(findings)}


# --- extracting the JSON ----------------------------------------------------------------


def test_extract_json_from_plain_fenced_and_prose() -> None:
    obj = review(finding())
    assert extract_json(json.dumps(obj)) == obj
    fenced = "Draft:\n```json\n{\"x\": 1}\n```\nFinal:\n```json\n" + json.dumps(obj) + "\n```"
    assert extract_json(fenced) == obj  # the last fence wins
    assert extract_json("Sure! " + json.dumps(obj) + " Hope this helps.") == obj
    with pytest.raises(InvalidAnswer, match="empty"):
        extract_json("  \n")
    with pytest.raises(InvalidAnswer, match="no parseable JSON"):
        extract_json("The change looks good {but no json}")


# --- validating an answer ---------------------------------------------------------------


def test_valid_review_normalises_harmless_variations() -> None:
    answer = parse_answer("review", "full", review(
        finding(path="b/src/a.py", severity="MAJOR", side="right", start_line=3),
        finding(path="./src/b.py", start_line=1, line=4)))
    first, second = answer.findings
    assert (first.path, first.severity, first.side, first.start_line) == (
        "src/a.py", "major", "RIGHT", None)
    assert (second.path, second.start_line) == ("src/b.py", 1)
    assert answer.assessment is not None and answer.assessment.risk == "low"


@pytest.mark.parametrize(("bad", "message"), [
    (finding(line=0), r"findings\[0\]\.line: must be a positive integer"),
    (finding(line=True), r"findings\[0\]\.line"),
    (finding(line="3"), r"findings\[0\]\.line"),
    (finding(side="BOTH"), r"findings\[0\]\.side: must be one of RIGHT, LEFT"),
    (finding(severity="urgent"), r"severity"),
    (finding(category="vibes"), r"category"),
    (finding(title=""), r"title: must be a non-empty string"),
    (finding(start_line=9), r"start_line: must not be greater than line"),
    (finding(path="/etc/passwd"), r"path: must be relative"),
    ({**finding(), "patch": "x"}, r"patch: unexpected field"),
    ("not an object", r"findings\[0\]: must be an object"),
])
def test_invalid_findings_name_the_field(bad: Any, message: str) -> None:
    with pytest.raises(InvalidAnswer, match=message):
        parse_answer("review", "full", review(bad))


def test_invalid_top_level_shapes() -> None:
    with pytest.raises(InvalidAnswer, match="must be a JSON object"):
        parse_answer("review", "full", [])
    with pytest.raises(InvalidAnswer, match="findings: must be an array"):
        parse_answer("review", "full", {"summary": "s", "risk": "low"})
    with pytest.raises(InvalidAnswer, match="risk"):
        parse_answer("review", "full", {"summary": "s", "risk": "none", "findings": []})
    with pytest.raises(InvalidAnswer, match="changes"):
        parse_answer("describe", "full", {"title": "t", "summary": "s"})


def test_reduced_mode_keeps_only_correctness_and_security() -> None:
    answer = parse_answer("review", "reduced", review(
        finding(category="style"), finding(category="security"), finding(category="docs")))
    assert [f.category for f in answer.findings] == ["security"]
    assert answer.dropped == 2
    enum = review_schema("reduced")["properties"]["findings"]["items"]["properties"]
    assert enum["category"]["enum"] == ["correctness", "security"]


def test_too_many_findings_are_capped_and_long_text_cut() -> None:
    answer = parse_answer("review", "full",
                          review(*[finding(title="t" * 500)] * (MAX_FINDINGS + 5)))
    assert len(answer.findings) == MAX_FINDINGS and answer.dropped == 5
    assert len(answer.findings[0].title) == 200


def test_describe_answer_and_schemas_are_consistent() -> None:
    answer = parse_answer_text("describe", "full", json.dumps(
        {"title": "Add retries", "summary": "Retries 5xx.", "changes": ["a", "b"]}))
    assert answer.description is not None and answer.description.changes == ("a", "b")
    assert set(describe_schema()["required"]) == {"title", "summary", "changes"}
    item = review_schema("full")["properties"]["findings"]["items"]
    assert set(item["required"]) == {"path", "line", "side", "severity", "category",
                                     "title", "body"}


def test_absurd_nesting_is_an_invalid_answer_not_a_crash() -> None:
    with pytest.raises(InvalidAnswer):
        extract_json("[" * 100_000)


def test_the_answer_is_one_string_and_nothing_else() -> None:
    assert ask_schema()["required"] == ["answer"]
    parsed = parse_answer_text("ask", "full", "```json\n" + json.dumps(ASKED) + "\n```")
    assert parsed.answer == ASKED["answer"] and parsed.findings == ()
    with pytest.raises(InvalidAnswer, match="answer"):
        parse_answer_text("ask", "full", '{"answer": ""}')
    with pytest.raises(InvalidAnswer):
        parse_answer_text("ask", "full", '{"answer": "x", "findings": []}')
