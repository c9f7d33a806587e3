"""Unified-diff parsing: which lines of which file a review comment may anchor to.

GitHub resolves each inline review comment against the pull request's diff: a comment
on the ``RIGHT`` side must name a line number of the new file that appears in one of the
file's hunks (an added or a context line); ``LEFT`` names an old-file line (a deleted or a
context line). The simulator parses the same ``git diff`` text it serves for the
``.diff`` media type, so the two can never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Side = Literal["LEFT", "RIGHT"]

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_GIT_HEADER_RE = re.compile(r"^diff --git (\"?a/.*\"?) (\"?b/.*\"?)$")
_INDEX_RE = re.compile(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)")


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: its header line, body lines, and the line numbers it shows per side."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...]  # lines[0] is the "@@ ... @@" header
    left: frozenset[int]
    right: frozenset[int]

    def shows(self, side: Side, line: int) -> bool:
        return line in (self.left if side == "LEFT" else self.right)

    def text_through(self, side: Side, line: int) -> str:
        """The hunk from its header down to ``line`` on ``side``: GitHub's ``diff_hunk``."""
        old, new = self.old_start, self.new_start
        out = [self.lines[0]]
        for raw in self.lines[1:]:
            out.append(raw)
            tag = raw[:1]
            if tag == "\\":
                continue
            hit = (side == "LEFT" and tag in " -" and old == line) or (
                side == "RIGHT" and tag in " +" and new == line
            )
            if tag in " -":
                old += 1
            if tag in " +":
                new += 1
            if hit:
                break
        return "\n".join(out)


@dataclass(frozen=True)
class FileDiff:
    """One file's section of a unified diff."""

    path: str
    old_path: str | None
    status: str  # added | removed | modified | renamed
    binary: bool
    hunks: tuple[Hunk, ...]
    additions: int
    deletions: int
    text: str  # the whole section, headers included
    head_blob: str | None = None
    positions: tuple[tuple[Side, int] | None, ...] = field(default=(), repr=False)

    @property
    def patch(self) -> str | None:
        """The hunks only (GitHub's ``patch`` field); None for binary or empty changes."""
        if self.binary or not self.hunks:
            return None
        return "\n".join(line for hunk in self.hunks for line in hunk.lines)

    def hunk_at(self, side: Side, line: int) -> Hunk | None:
        for hunk in self.hunks:
            if hunk.shows(side, line):
                return hunk
        return None

    def position_of(self, side: Side, line: int) -> int | None:
        """The legacy ``position`` GitHub reports for a comment on ``side``/``line``."""
        try:
            return self.positions.index((side, line)) + 1
        except ValueError:
            return None

    def position_target(self, position: int) -> tuple[Side, int] | None:
        """The legacy ``position`` (1 = the line below the first ``@@``) as (side, line)."""
        if position < 1 or position > len(self.positions):
            return None
        return self.positions[position - 1]


def _unquote(path: str) -> str:
    if len(path) >= 2 and path[0] == '"' and path[-1] == '"':
        path = path[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        path = path.encode("latin-1").decode("utf-8", "replace")
    return path


def _strip_prefix(path: str) -> str | None:
    path = _unquote(path.split("\t", 1)[0])
    if path == "/dev/null":
        return None
    if path[:2] in ("a/", "b/"):
        return path[2:]
    return path


class _FileBuilder:
    def __init__(self, header: str) -> None:
        self.lines: list[str] = [header]
        self.old: str | None = None
        self.new: str | None = None
        self.status = "modified"
        self.binary = False
        self.head_blob: str | None = None
        self.hunks: list[Hunk] = []
        match = _GIT_HEADER_RE.match(header)
        if match:
            self.old = _strip_prefix(match.group(1))
            self.new = _strip_prefix(match.group(2))

    def meta(self, line: str) -> None:
        self.lines.append(line)
        if line.startswith("new file mode"):
            self.status = "added"
        elif line.startswith("deleted file mode"):
            self.status = "removed"
        elif line.startswith("rename from "):
            self.old, self.status = _unquote(line[len("rename from ") :]), "renamed"
        elif line.startswith("rename to "):
            self.new, self.status = _unquote(line[len("rename to ") :]), "renamed"
        elif line.startswith(("Binary files ", "GIT binary patch")):
            self.binary = True
        elif line.startswith("--- "):
            old = _strip_prefix(line[4:])
            if old is None:
                self.status = "added"
            else:
                self.old = old
        elif line.startswith("+++ "):
            new = _strip_prefix(line[4:])
            if new is None:
                self.status = "removed"
            else:
                self.new = new
        else:
            match = _INDEX_RE.match(line)
            if match:
                self.head_blob = match.group(2)

    def build(self) -> FileDiff:
        path = self.new if self.status != "removed" else self.old
        if path is None:
            path = self.old or self.new or ""
        positions: list[tuple[Side, int] | None] = []
        for number, hunk in enumerate(self.hunks):
            if number:
                positions.append(None)  # a later hunk's header occupies a position
            positions.extend(_body_positions(hunk))
        return FileDiff(
            path=path,
            old_path=self.old if self.status == "renamed" else None,
            status=self.status,
            binary=self.binary,
            hunks=tuple(self.hunks),
            additions=sum(1 for h in self.hunks for ln in h.lines[1:] if ln[:1] == "+"),
            deletions=sum(1 for h in self.hunks for ln in h.lines[1:] if ln[:1] == "-"),
            text="\n".join(self.lines),
            head_blob=self.head_blob,
            positions=tuple(positions),
        )


def _body_positions(hunk: Hunk) -> list[tuple[Side, int] | None]:
    old, new = hunk.old_start, hunk.new_start
    out: list[tuple[Side, int] | None] = []
    for raw in hunk.lines[1:]:
        tag = raw[:1]
        if tag == "-":
            out.append(("LEFT", old))
            old += 1
        elif tag == "+":
            out.append(("RIGHT", new))
            new += 1
        elif tag == " ":
            out.append(("RIGHT", new))
            old += 1
            new += 1
        else:
            out.append(None)
    return out


def _read_hunk(header: str, lines: list[str], start: int) -> tuple[Hunk, int]:
    match = _HUNK_RE.match(header)
    if match is None:  # pragma: no cover - caller checked
        raise ValueError(f"not a hunk header: {header!r}")
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_count = int(match.group(2)) if match.group(2) is not None else 1
    new_count = int(match.group(4)) if match.group(4) is not None else 1
    body = [header]
    left: set[int] = set()
    right: set[int] = set()
    old, new = old_start, new_start
    old_left, new_left = old_count, new_count
    index = start
    # Counting the remaining lines (rather than looking for the next header) is what
    # keeps a deleted line that starts with "-- " from being read as a file header.
    while index < len(lines) and (old_left > 0 or new_left > 0 or lines[index][:1] == "\\"):
        raw = lines[index]
        tag = raw[:1] if raw else " "
        if tag == "\\":
            body.append(raw)
        elif tag == "-":
            left.add(old)
            old, old_left = old + 1, old_left - 1
            body.append(raw)
        elif tag == "+":
            right.add(new)
            new, new_left = new + 1, new_left - 1
            body.append(raw)
        elif tag == " ":
            left.add(old)
            right.add(new)
            old, new = old + 1, new + 1
            old_left, new_left = old_left - 1, new_left - 1
            body.append(raw if raw else " ")
        else:
            break
        index += 1
    hunk = Hunk(old_start, old_count, new_start, new_count, tuple(body),
                frozenset(left), frozenset(right))
    return hunk, index


def parse_diff(text: str) -> tuple[FileDiff, ...]:
    """Parse a ``git diff`` (or plain unified diff) into per-file sections."""
    lines = text.splitlines()
    files: list[FileDiff] = []
    current: _FileBuilder | None = None
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("diff --git "):
            if current is not None:
                files.append(current.build())
            current = _FileBuilder(line)
            index += 1
        elif line.startswith("--- ") and index + 1 < len(lines) and lines[index + 1].startswith(
            "+++ "
        ) and (current is None or current.hunks):
            # A plain unified diff (no "diff --git" line) starts a file at "---".
            if current is not None:
                files.append(current.build())
            current = _FileBuilder(line)
            current.lines.pop()
            current.meta(line)
            index += 1
        elif _HUNK_RE.match(line) and current is not None:
            hunk, index = _read_hunk(line, lines, index + 1)
            current.hunks.append(hunk)
            current.lines.extend(hunk.lines)
        else:
            if current is not None:
                current.meta(line)
            index += 1
    if current is not None:
        files.append(current.build())
    return tuple(files)


def diff_line_count(text: str) -> int:
    """Lines in the whole diff, headers and context included (what GitHub's 406 limit counts)."""
    return len(text.splitlines())
