"""The findings schema, answer validation, the hunk parser and split_findings (pure)."""

from __future__ import annotations

import difflib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.engine.base import Finding
from service.engine.findings import (
    MAX_FINDINGS,
    InvalidAnswer,
    describe_schema,
    extract_json,
    parse_answer,
    parse_answer_text,
    parse_hunks,
    review_schema,
    split_findings,
)
from tests.kit.thorough import examples


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


# --- hunks ------------------------------------------------------------------------------

DIFF = """diff --git a/src/a.py b/src/a.py
index 83db48f..bf269f4 100644
--- a/src/a.py
+++ b/src/a.py
@@ -2,4 +2,5 @@ import os
 line2
--- a removed line that looks like a header
+++ an added line that looks like a header
 line4
+line5 new
 line6
@@ -20 +21 @@ def f():
-old20
+new21
\\ No newline at end of file
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git "a/dir/sp\\303\\244ce name.md" "b/dir/sp\\303\\244ce name.md"
--- "a/dir/sp\\303\\244ce name.md"
+++ "b/dir/sp\\303\\244ce name.md"
@@ -1 +1 @@
-x
+y
diff --git a/img.png b/img.png
Binary files a/img.png and b/img.png differ
"""


def test_parse_hunks_handles_the_usual_shapes() -> None:
    hunks = parse_hunks(DIFF)
    assert set(hunks) == {"src/a.py", "new.txt", "gone.txt", "dir/späce name.md"}
    first, second = hunks["src/a.py"]
    assert first.right == frozenset({2, 3, 4, 5, 6})
    assert first.left == frozenset({2, 3, 4, 5})
    assert (second.left, second.right) == (frozenset({20}), frozenset({21}))
    assert hunks["new.txt"][0].right == frozenset({1, 2})
    assert hunks["gone.txt"][0].left == frozenset({1})
    assert "img.png" not in hunks


def test_split_findings_keeps_off_diff_findings_for_the_body() -> None:
    def f(**kw: Any) -> Finding:
        return Finding(**{"path": "src/a.py", "line": 5, "side": "RIGHT", "start_line": None,
                          "severity": "minor", "category": "tests", "title": "t",
                          "body": "b", **kw})

    candidates = [
        f(),                                  # added line: inline
        f(line=3, side="LEFT"),               # removed line: inline on LEFT
        f(line=21, start_line=20),            # start in another hunk/outside: body
        f(line=12),                           # between hunks: body
        f(line=6, side="LEFT", start_line=2),  # old line 6 is not in the hunk: body
        f(path="img.png", line=1),            # binary: body
        f(path="dir/späce name.md", line=1),  # quoted path: inline
        f(path="other.py", line=1),           # not in the diff: body
    ]
    inline, body = split_findings(candidates, DIFF)
    assert inline == (candidates[0], candidates[1], candidates[6])
    assert body == (candidates[2], candidates[3], candidates[4], candidates[5], candidates[7])


lines_strategy = st.lists(st.sampled_from(["a", "b", "c", "d", "", "x = 1", "-- y", "+z"]),
                          max_size=25)


@settings(max_examples=examples(150), deadline=None)
@given(old=lines_strategy, new=lines_strategy)
def test_every_changed_line_is_commentable(old: list[str], new: list[str]) -> None:
    """Property: for any diff difflib makes, each added line is in a RIGHT hunk set and
    each removed line in a LEFT one, and nothing outside the files is."""
    diff = "".join(difflib.unified_diff([s + "\n" for s in old], [s + "\n" for s in new],
                                        "a/f.txt", "b/f.txt", n=2))
    hunks = parse_hunks(diff).get("f.txt", ())
    right = set().union(*(h.right for h in hunks)) if hunks else set()
    left = set().union(*(h.left for h in hunks)) if hunks else set()
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            assert set(range(j1 + 1, j2 + 1)) <= right
        if tag in ("replace", "delete"):
            assert set(range(i1 + 1, i2 + 1)) <= left
    assert right <= set(range(1, len(new) + 1))
    assert left <= set(range(1, len(old) + 1))


def test_absurd_nesting_is_an_invalid_answer_not_a_crash() -> None:
    with pytest.raises(InvalidAnswer):
        extract_json("[" * 100_000)
