"""Layer 2 and git's diff: globs, what is withheld, the diff paired with git's file list."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.review.diff import (
    DiffError,
    FileDiff,
    excluded_by,
    line_count,
    pair_files,
    parse_name_status,
    select,
    split_sections,
)

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)



@pytest.mark.parametrize(("path", "pattern", "matches"), [
    ("yarn.lock", "*.lock", True),
    ("web/app/yarn.lock", "*.lock", True),
    ("lockfile", "*.lock", False),
    ("vendor/x.go", "**/vendor/**", True),
    ("a/b/vendor/c/d.go", "**/vendor/**", True),
    ("a/vendored/x.go", "**/vendor/**", False),
    ("docs/api.md", "docs/*.md", True),
    ("docs/deep/api.md", "docs/*.md", False),
    ("x/docs/api.md", "docs/*.md", False),
    ("docs/deep/api.md", "docs/**", True),
    ("src/gen_1.py", "src/gen_?.py", True),
    ("src/gen_12.py", "src/gen_?.py", False),
    ("img/a.png", "*.[pj]ng", True),
    ("img/a.jng", "*.[!p]ng", True),
    ("img/a.png", "*.[!p]ng", False),
    ("a+b(c).txt", "a+b(c).txt", True),
])
def test_globs(path: str, pattern: str, matches: bool) -> None:
    assert (excluded_by(path, [pattern]) == pattern) is matches


def test_a_blank_glob_is_refused() -> None:
    with pytest.raises(ValueError, match="glob"):
        excluded_by("x", ["/"])


def _file(path: str, lines: int, old: str | None = None) -> FileDiff:
    header = f"diff --git a/{old or path} b/{path}\n"
    return FileDiff(path, old, "R" if old else "M", header + "+x\n" * (lines - 1))


def test_select_withholds_excluded_then_keeps_whole_files_within_the_cap() -> None:
    files = [_file("a.py", 40), _file("big.py", 100), _file("yarn.lock", 5), _file("b.py", 60),
             _file("c.py", 10), _file("new/name.py", 3, old="vendor/old.py")]
    chosen = select(files, excluded=["*.lock", "vendor/**"], max_lines=100)
    assert chosen.paths == ("a.py", "b.py")
    assert chosen.lines == 100 and chosen.truncated
    assert [(o.path, o.reason, o.pattern) for o in chosen.omitted] == [
        ("big.py", "max_diff_lines", None), ("yarn.lock", "excluded", "*.lock"),
        ("c.py", "max_diff_lines", None), ("new/name.py", "excluded", "vendor/**")]
    assert chosen.diff == files[0].text + files[3].text
    assert not select(files[:1], excluded=[], max_lines=100).truncated
    with pytest.raises(ValueError, match="max_lines"):
        select(files, excluded=[], max_lines=0)


def test_line_count_splits_on_newlines_only() -> None:
    assert line_count("") == 0
    assert line_count("a\nb\n") == 2
    assert line_count("a\nb") == 2
    assert line_count("a\u2028b\rc\n") == 1


DIFF = (
    "diff --git a/x.sql b/x.sql\n--- a/x.sql\n+++ b/x.sql\n@@ -1,2 +1,1 @@\n"
    "--- diff --git looks like a header but is a removed line\n keep\n"
    "diff --git a/old.txt b/new.txt\nsimilarity index 90%\nrename from old.txt\n"
    "rename to new.txt\n"
    "diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n"
)


def test_the_diff_is_paired_with_git_s_file_list() -> None:
    names = parse_name_status("M\0x.sql\0R090\0old.txt\0new.txt\0M\0img.png\0")
    assert names == [("M", "x.sql", None), ("R", "new.txt", "old.txt"), ("M", "img.png", None)]
    files = pair_files(DIFF, names)
    assert [f.path for f in files] == ["x.sql", "new.txt", "img.png"]
    assert files[1].old_path == "old.txt"
    assert "".join(f.text for f in files) == DIFF
    assert [f.lines for f in files] == [6, 4, 2]


def test_a_disagreeing_file_list_is_an_error() -> None:
    with pytest.raises(DiffError, match="listed 1"):
        pair_files(DIFF, [("M", "x.sql", None)])
    with pytest.raises(DiffError, match="header"):
        split_sections("garbage\n" + DIFF)
    with pytest.raises(DiffError):
        parse_name_status("R100\0only-one\0")
    assert split_sections("") == []
