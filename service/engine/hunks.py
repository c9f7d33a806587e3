"""The hunks of a unified diff, and which findings may be posted inline. Pure.

GitHub accepts a review comment only on a line a hunk of the pull request's diff shows
(else 422), so ``split_findings`` keeps inline only the findings whose lines lie inside a
hunk of the diff that was reviewed; the rest go in the review body.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from service.engine.base import (
    Finding,
)


@dataclass(frozen=True)
class Hunk:
    """One ``@@`` hunk: the file lines it shows on each side (context lines on both)."""

    left: frozenset[int]
    right: frozenset[int]


_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def parse_hunks(diff: str) -> dict[str, tuple[Hunk, ...]]:
    """Map each file of a unified (``git diff``) diff to its hunks.

    A file is keyed by its new path (its old path when deleted). Binary files and pure
    renames have no hunks. Lines are split on ``\\n`` only, so a U+2028 inside a code
    line does not shift the numbering.
    """
    parser = _HunkParser()
    for line in diff.split("\n"):
        parser.feed(line)
    parser.close_hunk()
    return {path: tuple(hunks) for path, hunks in parser.files.items()}


class _HunkParser:
    """A line-at-a-time state machine over a unified diff."""

    def __init__(self) -> None:
        self.files: dict[str, list[Hunk]] = {}
        self.old_path: str | None = None
        self.current: list[Hunk] | None = None
        self.left: set[int] = set()
        self.right: set[int] = set()
        self.old_no = self.new_no = self.old_left = self.new_left = 0

    def feed(self, line: str) -> None:
        if (self.old_left > 0 or self.new_left > 0) and self._body_line(line):
            return
        if line.startswith("\\"):  # "\ No newline at end of file"
            return
        match = _HUNK.match(line)
        if match and self.current is not None:
            self.close_hunk()
            self.old_no, self.new_no = int(match.group(1)), int(match.group(3))
            self.old_left = 1 if match.group(2) is None else int(match.group(2))
            self.new_left = 1 if match.group(4) is None else int(match.group(4))
        elif line.startswith("diff --git "):
            self.close_hunk()
            self.current, self.old_path = None, None
        elif line.startswith("--- "):
            self.close_hunk()
            self.old_path, self.current = _header_path(line[4:]), None
            self.old_path = self.old_path or "/dev/null"
        elif line.startswith("+++ ") and self.old_path is not None:
            new_path = _header_path(line[4:])
            path = new_path if new_path is not None else self.old_path
            self.current = self.files.setdefault(path, [])

    def _body_line(self, line: str) -> bool:
        """Consume one line inside a hunk; False when it is not a hunk line after all."""
        tag = line[:1]
        if tag in (" ", ""):
            self.left.add(self.old_no)
            self.right.add(self.new_no)
            self.old_no, self.old_left = self.old_no + 1, self.old_left - 1
            self.new_no, self.new_left = self.new_no + 1, self.new_left - 1
        elif tag == "-":
            self.left.add(self.old_no)
            self.old_no, self.old_left = self.old_no + 1, self.old_left - 1
        elif tag == "+":
            self.right.add(self.new_no)
            self.new_no, self.new_left = self.new_no + 1, self.new_left - 1
        elif tag != "\\":
            self.old_left = self.new_left = 0  # a malformed hunk ends early
            return False
        return True

    def close_hunk(self) -> None:
        if self.current is not None and (self.left or self.right):
            self.current.append(Hunk(frozenset(self.left), frozenset(self.right)))
        self.left = set()
        self.right = set()


def _header_path(raw: str) -> str | None:
    """The path in a ``---``/``+++`` header: unquoted, prefix dropped, None for /dev/null."""
    raw = raw.rstrip("\n").split("\t", 1)[0]
    if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
        raw = _unquote_c(raw[1:-1])
    if raw == "/dev/null":
        return None
    if raw.startswith(("a/", "b/")):
        return raw[2:]
    return raw


def _unquote_c(text: str) -> str:
    """Undo git's C-style path quoting (``\\"``, ``\\\\``, ``\\t``, octal UTF-8 bytes)."""
    out = bytearray()
    i = 0
    simple = {"n": b"\n", "t": b"\t", '"': b'"', "\\": b"\\", "a": b"\a", "b": b"\b",
              "f": b"\f", "r": b"\r", "v": b"\v"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in simple:
                out += simple[nxt]
                i += 2
                continue
            if re.fullmatch(r"[0-7]{3}", text[i + 1 : i + 4]):
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", errors="replace")


def is_inline(finding: Finding, hunks: Mapping[str, tuple[Hunk, ...]]) -> bool:
    """True when GitHub can anchor ``finding``: its line (and start_line) lie in one
    hunk of its file, on its side."""
    for hunk in hunks.get(finding.path, ()):
        lines = hunk.right if finding.side == "RIGHT" else hunk.left
        if finding.line in lines and (finding.start_line is None or finding.start_line in lines):
            return True
    return False


def split_findings(
    findings: Iterable[Finding], diff: str
) -> tuple[tuple[Finding, ...], tuple[Finding, ...]]:
    """``(inline, body_only)``: findings postable on the diff, and the rest, in order."""
    hunks = parse_hunks(diff)
    inline: list[Finding] = []
    body_only: list[Finding] = []
    for finding in findings:
        (inline if is_inline(finding, hunks) else body_only).append(finding)
    return tuple(inline), tuple(body_only)
