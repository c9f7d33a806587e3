"""The diff a run reviews, and layer 2 of the budget: what is withheld from it.

``read_diff`` asks git for ``base...head`` (the changes on ``head`` since the merge base,
as GitHub shows a pull request) and splits it into one ``FileDiff`` per file. ``select``
is pure: it withholds the files ``review.excluded_paths`` matches, then keeps whole files
in diff order while they fit ``review.max_diff_lines``; everything withheld is listed as
an ``Omitted`` entry for ``runs.omitted``.

Lines are counted as the engine's findings parser counts them: split on ``\\n`` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Final

from service.publish.run_content import Omitted

if TYPE_CHECKING:
    from service.review.checkout import BareRepo


# MULTILINE ``^`` in Python's re follows ``\n`` only, as the line count does.
_HEADER_RE: Final = re.compile(r"^diff --git ", re.MULTILINE)
# Options shared by the diff and its file list, so both list the same files in one order.
_DIFF_OPTIONS: Final = ("--no-color", "--no-ext-diff", "--no-textconv", "-M")


class DiffError(RuntimeError):
    """git's diff and its file list disagree: the diff cannot be split safely."""


@dataclass(frozen=True)
class FileDiff:
    """One file's section of a unified diff.

    ``path`` is the file's path on the head side (its old path when it was deleted);
    ``old_path`` is set for a rename or copy. ``status`` is git's letter (A, C, D, M, R, T).
    """

    path: str
    old_path: str | None
    status: str
    text: str

    @property
    def lines(self) -> int:
        return line_count(self.text)


@dataclass(frozen=True)
class Selection:
    """What the engine is given after layer 2, and what it is not."""

    files: tuple[FileDiff, ...]
    omitted: tuple[Omitted, ...]

    @property
    def diff(self) -> str:
        return "".join(f.text for f in self.files)

    @property
    def lines(self) -> int:
        return sum(f.lines for f in self.files)

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def truncated(self) -> bool:
        """Some file was withheld for size: the review covers a bounded part."""
        return any(o.reason == "max_diff_lines" for o in self.omitted)


def line_count(text: str) -> int:
    """Lines in ``text``, split on ``\\n`` only (a last line without one still counts)."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


# --- globs ---------------------------------------------------------------------------


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile an ``excluded_paths`` glob.

    ``*`` and ``?`` stay within one path segment, ``**`` spans segments (``**/`` also
    matches no directory at all, so ``**/vendor/**`` covers ``vendor/x``), ``[...]`` is a
    character class. A pattern without ``/`` matches a file name at any depth, as in
    ``.gitignore``: ``*.lock`` withholds ``yarn.lock`` and ``web/yarn.lock``.
    """
    if not pattern.strip("/"):
        raise ValueError(f"not a usable glob: {pattern!r}")
    body = pattern.lstrip("/")
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if body.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif body.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = body.find("]", i + 2)
            if end == -1:
                out.append(re.escape(ch))
                i += 1
                continue
            inner = body[i + 1:end]
            negate = inner.startswith(("!", "^"))
            inner = inner[1:] if negate else inner
            out.append("[" + ("^" if negate else "") + inner.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    anchored = "/" in pattern.rstrip("/")
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + "".join(out) + r"\Z")


def excluded_by(path: str, patterns: Iterable[str]) -> str | None:
    """The first pattern in ``patterns`` that matches ``path``, or None."""
    for pattern in patterns:
        if glob_regex(pattern).match(path):
            return pattern
    return None


# --- layer 2 -------------------------------------------------------------------------


def select(files: Sequence[FileDiff], *, excluded: Sequence[str], max_lines: int) -> Selection:
    """Withhold excluded files, then keep whole files, in diff order, within ``max_lines``.

    A file too big for what is left of the cap is withheld and the next ones are still
    tried: a review of every file that fits is worth more than stopping at the first big
    one (a generated file, a fixture). A renamed file is excluded when either of its
    paths matches.
    """
    if max_lines < 1:
        raise ValueError("max_lines must be at least 1")
    kept: list[FileDiff] = []
    omitted: list[Omitted] = []
    budget = max_lines
    for f in files:
        pattern = excluded_by(f.path, excluded)
        if pattern is None and f.old_path is not None:
            pattern = excluded_by(f.old_path, excluded)
        if pattern is not None:
            omitted.append(Omitted(f.path, "excluded", f.lines, pattern))
        elif f.lines > budget:
            omitted.append(Omitted(f.path, "max_diff_lines", f.lines))
        else:
            kept.append(f)
            budget -= f.lines
    return Selection(tuple(kept), tuple(omitted))


# --- reading it from git ---------------------------------------------------------------


def parse_name_status(raw: str) -> list[tuple[str, str, str | None]]:
    """``git diff -z --name-status`` as ``(status letter, path, old path or None)``."""
    fields = raw.split("\0")
    if fields and fields[-1] == "":
        fields.pop()
    out: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(fields):
        status = fields[i]
        if not status:
            raise DiffError("empty status in git's file list")
        letter = status[0]
        if letter in "RC":
            if i + 2 >= len(fields):
                raise DiffError("truncated rename in git's file list")
            out.append((letter, fields[i + 2], fields[i + 1]))
            i += 3
        else:
            if i + 1 >= len(fields):
                raise DiffError("truncated entry in git's file list")
            out.append((letter, fields[i + 1], None))
            i += 2
    return out


def split_sections(text: str) -> list[str]:
    """Split a unified diff at its ``diff --git`` headers (a hunk line never starts so)."""
    if not text:
        return []
    starts = [m.start() for m in _HEADER_RE.finditer(text)]
    if not starts or starts[0] != 0:
        raise DiffError("git's diff does not start with a file header")
    ends = [*starts[1:], len(text)]
    return [text[s:e] for s, e in zip(starts, ends, strict=True)]


def pair_files(text: str, names: Sequence[tuple[str, str, str | None]]) -> tuple[FileDiff, ...]:
    """Join the diff's sections with git's file list (same order, same count)."""
    sections = split_sections(text)
    if len(sections) != len(names):
        raise DiffError(f"git listed {len(names)} file(s) but the diff has {len(sections)}")
    return tuple(FileDiff(path=path, old_path=old, status=status, text=section)
                 for (status, path, old), section in zip(names, sections, strict=True))


async def read_diff(repo: BareRepo, base: str, head: str) -> tuple[FileDiff, ...]:
    """``base...head`` from the bare cache, one ``FileDiff`` per file, in git's order."""
    spec = f"{base}...{head}"
    text = await repo.run("diff", *_DIFF_OPTIONS, "--full-index", spec, "--")
    names = await repo.run("diff", *_DIFF_OPTIONS, "-z", "--name-status", spec, "--")
    return pair_files(text.decode("utf-8", "replace"),
                      parse_name_status(names.decode("utf-8", "replace")))
