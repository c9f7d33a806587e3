"""Making a file's diff smaller without losing what a review needs. Pure.

Used only when a pull request does not fit one call (``packing``), cheapest loss first:

- ``shed_reason``: files a review gains little from — lock files, minified and source-map
  files, files ``.gitattributes`` marks ``linguist-generated`` or ``linguist-vendored``
  (as GitHub's own diff view collapses them), and files renamed without a change;
- ``drop_deletion_only``: hunks that only remove lines (the code is gone; what replaced
  it, if anything, is in other hunks);
- ``trim_context``: context lines beyond ``keep`` on each side of a change.

Hunk headers are rewritten to match what is kept, so the result is still a valid unified
diff and every line number the model reads is the file's own. Inline comments are placed
against GitHub's diff, not this one (``engine.hunks``), so nothing here moves a comment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from service.review.diff import FileDiff, glob_regex

#: Lock files by name: machine-written, long, and reviewed by the tools that write them.
LOCK_FILES: Final = frozenset({
    "package-lock.json", "npm-shrinkwrap.json", "yarn.lock", "pnpm-lock.yaml", "bun.lock",
    "bun.lockb", "Cargo.lock", "poetry.lock", "Pipfile.lock", "uv.lock", "pdm.lock",
    "Gemfile.lock", "composer.lock", "go.sum", "mix.lock", "Podfile.lock", "flake.lock",
    "packages.lock.json", "pubspec.lock", "gradle.lockfile",
})
#: Minified bundles and source maps: generated, one enormous line each.
GENERATED_SUFFIXES: Final = (".min.js", ".min.css", ".js.map", ".css.map")
#: The largest ``.gitattributes`` read (GitHub's linguist reads the whole file; ours is
#: only for shedding, so a pathological one is read in part).
ATTRIBUTES_MAX_CHARS: Final = 64_000

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


@dataclass(frozen=True)
class Attributes:
    """The ``linguist-generated`` and ``linguist-vendored`` patterns of a repository's
    root ``.gitattributes`` (at the base), later lines winning as in git."""

    rules: tuple[tuple[str, str, bool], ...] = ()  # (pattern, attribute, set)

    def marks(self, path: str) -> str | None:
        """``generated``, ``vendored`` or None for ``path``."""
        state: dict[str, bool] = {}
        for pattern, attribute, value in self.rules:
            if glob_regex(pattern).match(path):
                state[attribute] = value
        if state.get("linguist-generated"):
            return "generated"
        if state.get("linguist-vendored"):
            return "vendored"
        return None


NO_ATTRIBUTES: Final = Attributes()


def read_attributes(text: str | None) -> Attributes:
    """Parse a ``.gitattributes``: ``pattern attr attr=true -attr attr=false …``."""
    if not text:
        return Attributes()
    rules: list[tuple[str, str, bool]] = []
    for raw in text[:ATTRIBUTES_MAX_CHARS].splitlines():
        words = raw.strip().split()
        if not words or words[0].startswith("#"):
            continue
        pattern = words[0]
        if not pattern.strip("/"):
            continue
        for word in words[1:]:
            name, value = word, True
            if word.startswith(("-", "!")):
                name, value = word[1:], False
            elif "=" in word:
                name, _, said = word.partition("=")
                value = said.lower() not in ("false", "0", "no")
            if name in ("linguist-generated", "linguist-vendored"):
                rules.append((pattern, name, value))
    return Attributes(tuple(rules))


def shed_reason(f: FileDiff, attributes: Attributes) -> str | None:
    """Why ``f`` is shed first when the pull request does not fit, or None."""
    name = f.path.rsplit("/", 1)[-1]
    if name in LOCK_FILES:
        return "lock_file"
    if name.endswith(GENERATED_SUFFIXES):
        return "generated"
    marked = attributes.marks(f.path)
    if marked is not None:
        return marked
    if f.status == "R" and "\n@@ " not in f.text and not f.text.startswith("@@ "):
        return "renamed_only"
    return None


# --- hunks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hunk:
    old_start: int
    new_start: int
    tail: str            # what follows the second @@ (git's function context)
    lines: tuple[str, ...]


def _split(text: str) -> tuple[str, list[_Hunk]] | None:
    """The file header and its hunks; None when a hunk header cannot be read."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines) and not lines[i].startswith("@@ "):
        i += 1
    header = "".join(lines[:i])
    hunks: list[_Hunk] = []
    while i < len(lines):
        match = _HUNK.match(lines[i].rstrip("\n"))
        if match is None:
            return None
        j = i + 1
        while j < len(lines) and not lines[j].startswith("@@ "):
            j += 1
        # An empty side's start names the line before it (``-0,0``): keep the first line's
        # own number, as ``_render`` expects.
        old_start = int(match.group(1)) + (match.group(2) == "0")
        new_start = int(match.group(3)) + (match.group(4) == "0")
        hunks.append(_Hunk(old_start, new_start, match.group(5), tuple(lines[i + 1:j])))
        i = j
    return header, hunks


def _render(old_start: int, old_count: int, new_start: int, new_count: int, *, tail: str,
            lines: Iterable[str]) -> str:
    # git writes an empty side's start as the line before it (``-0,0`` for a new file).
    old_at = old_start - 1 if old_count == 0 else old_start
    new_at = new_start - 1 if new_count == 0 else new_start
    return f"@@ -{old_at},{old_count} +{new_at},{new_count} @@{tail}\n" + "".join(lines)


def _kind(line: str) -> str:
    return line[:1] if line[:1] in ("+", "-", "\\") else " "


def drop_deletion_only(f: FileDiff) -> tuple[FileDiff, int]:
    """``f`` without its hunks that add nothing, and how many went."""
    split = _split(f.text)
    if split is None:
        return f, 0
    header, hunks = split
    kept = [h for h in hunks if any(_kind(line) == "+" for line in h.lines)]
    if len(kept) == len(hunks):
        return f, 0
    text = header + "".join(_render(h.old_start, _count(h.lines, "-"), h.new_start,
                                    _count(h.lines, "+"), tail=h.tail, lines=h.lines)
                            for h in kept)
    return FileDiff(f.path, f.old_path, f.status, text), len(hunks) - len(kept)


def _count(lines: Sequence[str], side: str) -> int:
    return sum(1 for line in lines if _kind(line) in (" ", side))


def trim_context(f: FileDiff, keep: int = 1) -> FileDiff:
    """``f`` with at most ``keep`` context lines on each side of every change."""
    split = _split(f.text)
    if split is None:
        return f
    header, hunks = split
    return FileDiff(f.path, f.old_path, f.status,
                    header + "".join(_trim(h, keep) for h in hunks))


def _trim(hunk: _Hunk, keep: int) -> str:
    kinds = [_kind(line) for line in hunk.lines]
    changes = [i for i, k in enumerate(kinds) if k in "+-"]
    wanted = [False] * len(kinds)
    for i in changes:
        wanted[i] = True
        for step in (-1, 1):
            j, seen = i + step, 0
            while 0 <= j < len(kinds) and seen < keep:
                if kinds[j] == " ":
                    wanted[j] = True
                    seen += 1
                elif kinds[j] != "\\":
                    break
                j += step
    out: list[str] = []
    old, new = hunk.old_start, hunk.new_start
    current: list[str] = []
    starts = (old, new)
    counts = [0, 0]
    tail = hunk.tail

    def close() -> None:
        nonlocal current, counts, tail
        if current:
            out.append(_render(starts[0], counts[0], starts[1], counts[1], tail=tail,
                               lines=current))
            tail = ""
        current, counts = [], [0, 0]

    for line, kind, keep_it in zip(hunk.lines, kinds, wanted, strict=True):
        if kind == "\\":
            if current:  # "\ No newline at end of file" belongs to the line before it
                current.append(line)
            continue
        if keep_it:
            if not current:
                starts = (old, new)
            current.append(line)
            counts[0] += kind in " -"
            counts[1] += kind in " +"
        else:
            close()
        old += kind in " -"
        new += kind in " +"
    close()
    return "".join(out)
