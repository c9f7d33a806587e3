"""The hunk parser and split_findings: which findings may be posted inline (pure)."""

from __future__ import annotations

import difflib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.engine.base import Finding
from service.engine.hunks import parse_hunks, split_findings
from tests.kit.thorough import examples

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
