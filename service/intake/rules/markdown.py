"""Blank out the parts of a comment that are not the author's own prose.

A trigger phrase counts only where GitHub would render it as running text: not inside a
fenced or indented code block, a ``>`` quote (lazy continuation lines included), or an
inline code span. ``mask_non_prose`` keeps the text's line structure and replaces every
excluded character with a space (excluded block lines become empty), so the mention finder
can search the result with plain string operations.

This follows CommonMark's block and code-span rules closely enough for triggering, and errs
towards *not* triggering where it simplifies: an indented line after a blank line is always
code (even inside a list item), a backslash-escaped backtick still delimits a code span,
and HTML is not interpreted. Everything here is linear in the input: one pass over the
lines, one pass over the backtick runs of each paragraph. No regex here can backtrack more
than a constant amount, so a megabyte-long body costs milliseconds, not minutes.
"""

from __future__ import annotations

import re
from collections import deque
from enum import Enum, auto

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# An opening fence: 3+ backticks whose info string holds no backtick, or 3+ tildes.
_FENCE_OPEN = re.compile(r"(`{3,})[^`]*|(~{3,}).*", re.DOTALL)
_FENCE_CLOSE = re.compile(r"(`{3,}|~{3,})[ \t]*")
_QUOTE_MARKERS = re.compile(r"(?:>[ \t]*)+")
_HEADING = re.compile(r"#{1,6}(?:[ \t]|$)")
# Blocks that may interrupt a (quoted) paragraph, so a line starting one is not a lazy
# continuation of the quote above it: a heading or a list item.
_INTERRUPTS = re.compile(r"#{1,6}(?:[ \t]|$)|[-+*][ \t]|\d{1,9}[.)][ \t]")
_BACKTICKS = re.compile(r"`+")
_NOT_NEWLINE = re.compile(r"[^\n]")


class _Prev(Enum):
    """What the previous line was, which decides how an indented or lazy line reads."""

    BLANK = auto()       # start of text, a blank line, or any block that has ended
    PARAGRAPH = auto()   # running text that an indented line would continue
    QUOTE_TEXT = auto()  # a quote line holding text that a lazy line would continue
    CODE = auto()        # an indented code line


def mask_non_prose(text: str) -> str:
    """Return ``text`` with ``\\n`` line endings and every non-prose character blanked.

    CRLF and lone CR are normalised to LF first; the result has exactly as many lines
    as the input. Prose lines keep their length (inline code spans become spaces).
    """
    scanner = _BlockScanner()
    for line in _LINE_BREAK.split(text):
        scanner.feed(line)
    return "\n".join(scanner.finish())


class _BlockScanner:
    """One pass over the lines, deciding for each whether it is prose.

    Prose lines are held back as a paragraph until it ends, because an inline code span
    may run over several lines of one paragraph (but never past its end).
    """

    def __init__(self) -> None:
        self.out: list[str] = []
        self.paragraph: list[str] = []
        self.fence: tuple[str, int] | None = None
        self.prev = _Prev.BLANK

    def finish(self) -> list[str]:
        self._flush()
        return self.out

    def feed(self, line: str) -> None:
        if self.fence is not None:
            self.out.append("")
            if _closes(line, self.fence):
                self.fence = None
            return
        stripped = line.lstrip(" \t")
        if not stripped:
            self._flush()
            self.out.append(line)
            self.prev = _Prev.BLANK
            return
        indent = _indent_columns(line[: len(line) - len(stripped)])
        if indent >= 4 and self.prev in (_Prev.BLANK, _Prev.CODE):
            # An indented code block cannot interrupt a paragraph; anywhere else it starts one.
            self._exclude(_Prev.CODE)
            return
        if indent < 4 and self._opens_block(stripped):
            return
        if self.prev is _Prev.QUOTE_TEXT and not (indent < 4 and _INTERRUPTS.match(stripped)):
            # A lazy continuation line: GitHub renders it inside the quote above.
            self.out.append("")
            return
        self.paragraph.append(line)
        self.prev = _Prev.PARAGRAPH
        if indent < 4 and _HEADING.match(stripped):
            # A heading is a block of one line: what follows does not continue it.
            self._flush()
            self.prev = _Prev.BLANK

    def _opens_block(self, stripped: str) -> bool:
        """Handle a line that opens a fence or is a quote line; False for anything else."""
        opened = _FENCE_OPEN.fullmatch(stripped)
        if opened is not None:
            run = opened.group(1) or opened.group(2)
            self._exclude(_Prev.BLANK)
            self.fence = (run[0], len(run))
            return True
        markers = _QUOTE_MARKERS.match(stripped)
        if markers is not None:
            content = stripped[markers.end() :]
            quoted_text = bool(content) and _FENCE_OPEN.fullmatch(content) is None
            self._exclude(_Prev.QUOTE_TEXT if quoted_text else _Prev.BLANK)
            return True
        return False

    def _exclude(self, prev: _Prev) -> None:
        """End any paragraph and emit one blanked line."""
        self._flush()
        self.out.append("")
        self.prev = prev

    def _flush(self) -> None:
        if self.paragraph:
            self.out.extend(_mask_code_spans("\n".join(self.paragraph)).split("\n"))
            self.paragraph.clear()


def _indent_columns(prefix: str) -> int:
    """Columns of leading spaces and tabs; a tab advances to the next multiple of 4."""
    if "\t" not in prefix:
        return len(prefix)
    column = 0
    for char in prefix:
        column = column + 4 - column % 4 if char == "\t" else column + 1
    return column


def _closes(line: str, fence: tuple[str, int]) -> bool:
    """Whether ``line`` closes ``fence``: same character, at least as long, <= 3 spaces in."""
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3:
        return False
    match = _FENCE_CLOSE.fullmatch(stripped)
    if match is None:
        return False
    run = match.group(1)
    return run[0] == fence[0] and len(run) >= fence[1]


def _mask_code_spans(text: str) -> str:
    """Blank every inline code span (delimiters included) in one paragraph.

    A run of N backticks opens a span that the next run of exactly N backticks closes;
    with no such run it is literal text and scanning goes on from the next run. A queue
    of run indices per length, consumed front to back, makes this linear in the runs.
    """
    runs = [(m.start(), m.end()) for m in _BACKTICKS.finditer(text)]
    if len(runs) < 2:
        return text
    by_length: dict[int, deque[int]] = {}
    for index, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, deque()).append(index)
    pieces: list[str] = []
    done = 0
    index = 0
    while index < len(runs):
        start, end = runs[index]
        same = by_length[end - start]
        while same and same[0] <= index:
            same.popleft()
        if not same:
            index += 1
            continue
        closer = same.popleft()
        span_end = runs[closer][1]
        pieces.append(text[done:start])
        pieces.append(_NOT_NEWLINE.sub(" ", text[start:span_end]))
        done = span_end
        index = closer + 1
    pieces.append(text[done:])
    return "".join(pieces)
