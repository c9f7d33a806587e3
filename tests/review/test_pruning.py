"""Making a file's diff smaller (``pruning``): what is shed, and hunks rewritten so that
every line number the model reads is still the file's own."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from service.review.diff import FileDiff
from service.review.pruning import (
    Attributes,
    drop_deletion_only,
    read_attributes,
    shed_reason,
    trim_context,
)
from tests.kit.thorough import examples

HEADER = "diff --git a/app.py b/app.py\nindex 1..2 100644\n--- a/app.py\n+++ b/app.py\n"


def diff(text: str, path: str = "app.py", status: str = "M") -> FileDiff:
    return FileDiff(path, None, status, text)


def test_lock_files_minified_files_and_bare_renames_are_shed() -> None:
    none = Attributes()
    assert shed_reason(diff(HEADER, "web/package-lock.json"), none) == "lock_file"
    assert shed_reason(diff(HEADER, "go.sum"), none) == "lock_file"
    assert shed_reason(diff(HEADER, "static/app.min.js"), none) == "generated"
    renamed = FileDiff("new.py", "old.py", "R",
                       "diff --git a/old.py b/new.py\nsimilarity index 100%\n"
                       "rename from old.py\nrename to new.py\n")
    assert shed_reason(renamed, none) == "renamed_only"
    edited = FileDiff("new.py", "old.py", "R", renamed.text + "@@ -1 +1 @@\n-a\n+b\n")
    assert shed_reason(edited, none) is None
    assert shed_reason(diff(HEADER + "@@ -1 +1 @@\n-a\n+b\n"), none) is None


def test_gitattributes_marks_generated_and_vendored_later_lines_winning() -> None:
    attributes = read_attributes(
        "# linguist\n"
        "*.pb.go linguist-generated=true\n"
        "third_party/** linguist-vendored\n"
        "third_party/ours/** -linguist-vendored\n"
        "docs/api.md linguist-generated\n"
        "docs/api.md linguist-generated=false\n"
        "*.c text eol=lf\n")
    assert attributes.marks("api/v1/service.pb.go") == "generated"
    assert attributes.marks("third_party/zlib/inflate.c") == "vendored"
    assert attributes.marks("third_party/ours/glue.c") is None
    assert attributes.marks("docs/api.md") is None
    assert attributes.marks("src/main.go") is None
    assert shed_reason(diff(HEADER, "api/x.pb.go"), attributes) == "generated"
    assert read_attributes(None) == Attributes()


def test_hunks_that_only_delete_go_and_the_rest_keep_their_numbers() -> None:
    text = (HEADER + "@@ -1,3 +1,2 @@ def a():\n x\n-gone\n y\n"
            "@@ -10,2 +9,3 @@ def b():\n p\n+new\n q\n")
    smaller, dropped = drop_deletion_only(diff(text))
    assert dropped == 1
    assert smaller.text == HEADER + "@@ -10,2 +9,3 @@ def b():\n p\n+new\n q\n"
    unchanged, none = drop_deletion_only(diff(HEADER + "@@ -1 +1 @@\n-a\n+b\n"))
    assert none == 0 and unchanged.text == HEADER + "@@ -1 +1 @@\n-a\n+b\n"


def test_context_is_trimmed_to_one_line_and_the_hunk_split_where_it_was_cut() -> None:
    body = "".join(f" c{i}\n" for i in range(1, 4)) + "+added\n" + "".join(
        f" c{i}\n" for i in range(4, 10)) + "-removed\n" + " c10\n" + " c11\n"
    text = HEADER + "@@ -1,11 +1,11 @@ class A:\n" + body
    trimmed = trim_context(diff(text), keep=1).text
    assert trimmed == (HEADER
                       + "@@ -3,2 +3,3 @@ class A:\n c3\n+added\n c4\n"
                       + "@@ -9,3 +10,2 @@\n c9\n-removed\n c10\n")


def test_a_missing_newline_marker_stays_with_its_line() -> None:
    text = HEADER + "@@ -1,3 +1,3 @@\n a\n b\n-c\n\\ No newline at end of file\n+d\n"
    trimmed = trim_context(diff(text), keep=1).text
    assert trimmed == HEADER + "@@ -2,2 +2,2 @@\n b\n-c\n\\ No newline at end of file\n+d\n"


def test_a_diff_whose_hunks_cannot_be_read_is_left_alone() -> None:
    odd = diff(HEADER + "@@ nonsense @@\n+x\n")
    assert trim_context(odd) == odd
    assert drop_deletion_only(odd) == (odd, 0)


_RANGE = re.compile(r"^@@ -(\d+),(\d+) \+(\d+),(\d+) @@", re.MULTILINE)


def _lines_by_number(text: str) -> tuple[dict[int, str], dict[int, str]]:
    """Each side's lines by their number, read back through the hunk headers."""
    old: dict[int, str] = {}
    new: dict[int, str] = {}
    o = n = 0
    for line in text.splitlines():
        match = _RANGE.match(line)
        if match:
            o = int(match.group(1)) if int(match.group(2)) else int(match.group(1)) + 1
            n = int(match.group(3)) if int(match.group(4)) else int(match.group(3)) + 1
            continue
        if line.startswith(("diff ", "index ", "--- ", "+++ ", "\\")):
            continue
        if line[:1] in (" ", "-"):
            old[o] = line[1:]
            o += 1
        if line[:1] in (" ", "+"):
            new[n] = line[1:]
            n += 1
    return old, new


@settings(max_examples=examples(150), deadline=None)
@given(kinds=st.lists(st.sampled_from(" +-"), min_size=1, max_size=60),
       keep=st.integers(0, 3))
def test_trimming_keeps_every_change_at_its_own_line_number(kinds: list[str],
                                                            keep: int) -> None:
    body = "".join(f"{k}line{i}\n" for i, k in enumerate(kinds))
    olds = sum(k in " -" for k in kinds)
    news = sum(k in " +" for k in kinds)
    text = HEADER + f"@@ -5,{olds} +7,{news} @@\n" + body
    full_old, full_new = _lines_by_number(text)
    trimmed = trim_context(diff(text), keep=keep).text
    old, new = _lines_by_number(trimmed)
    # Every line kept is where it was, and every change is kept.
    assert all(full_old[k] == v for k, v in old.items())
    assert all(full_new[k] == v for k, v in new.items())
    def changes(of: str) -> list[str]:
        return [line for line in of.splitlines()
                if line[:1] in "+-" and not line.startswith(("+++", "---"))]

    assert changes(trimmed) == changes(body)
