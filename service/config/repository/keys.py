"""The keys of a repository's ``.github/pr-review-agent.yml``, each declared once.

A repository (or its organisation's ``.github`` repository) says how its pull requests are
reviewed; the operator's config says what any review may cost, and which of these keys a
repository may set at all. Every key is optional: a key the file does not set is taken
from the organisation's file, then from the operator's config. ``RepoSettings`` holds one
file's keys, ``None`` for each it does not set; its fields are declared like the
operator's (``service.config.declare``), and docs/REPOSITORY-CONFIG.md's key table and the
JSON Schema published for editors are rendered from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from service.config.declare import Key, key, keys_of
from service.config.reader import show
from service.model.severity import SEVERITIES

__all__ = ["FIELDS", "FILE_PATH", "KEYS", "LANGUAGE", "MAX_FILE_BYTES", "MAX_INSTRUCTIONS",
           "MAX_PATH_INSTRUCTIONS", "PathInstruction", "RepoSettings"]

#: Where the file is read from: the default branch of the repository, and of the
#: organisation's ``.github`` repository for its defaults.
FILE_PATH: Final = ".github/pr-review-agent.yml"
#: A file larger than this is refused whole (GitHub serves up to 1 MB through the API).
MAX_FILE_BYTES: Final = 64 * 1024
#: The longest ``instructions`` (characters): a few paragraphs, not a second prompt.
MAX_INSTRUCTIONS: Final = 2000

#: The most ``path_instructions`` a file may give: each is counted in every prompt whose
#: files it matches, and the review must still leave room for the diff.
MAX_PATH_INSTRUCTIONS: Final = 10

#: Characters a ``language`` may use: letters, digits, spaces and hyphens.
LANGUAGE: Final = re.compile(r"[\w][\w \-]{0,39}")
_SEGMENT: Final = re.compile(r"[^/\\]+")
_INSIDE: Final = "a file path inside the repository, like docs/review.md"


def _inside_the_repository(path: str) -> str | None:
    """``guidelines``: no step out of the repository (its first character is checked by
    the declared pattern, which the JSON Schema carries too)."""
    if any(not _SEGMENT.fullmatch(p) or p in (".", "..") for p in path.split("/")):
        return f"must be {_INSIDE}, got {show(path)}"
    return None


@dataclass(frozen=True, kw_only=True)
class PathInstruction:
    """One of ``path_instructions``: what the reviewer is told about the files ``path``
    matches."""

    path: str = key("str",
        "A glob pattern of the files it applies to (`*` within a path segment, `**` across "
        "segments), like `excluded_paths`.",
        maximum=200, check=lambda p: None if p.strip("/") else
        f"must be a glob pattern of paths, got {show(p)}", example="migrations/**")
    instructions: str = key("str",
        f"What the reviewer is told about those files (at most {MAX_INSTRUCTIONS} "
        "characters), as the repository's words.",
        maximum=MAX_INSTRUCTIONS, example="Every migration must be reversible.")


@dataclass(frozen=True, kw_only=True)
class RepoSettings:
    """The keys one file sets; ``None`` for every key it leaves to the next level.

    Each field is one declared key (``declare.key``); its ``inherits`` is what is in force
    when no file sets it, in words, as docs/REPOSITORY-CONFIG.md's table says it."""

    auto_review: bool | None = key("bool",
        "Review a pull request when it opens, reopens or is marked ready for review.",
        None, inherits="the operator's `triggers.auto_review`", example=False)
    on_push: bool | None = key("bool",
        "Review again, incrementally, when commits are pushed to an open pull request.",
        None, inherits="the operator's `triggers.on_push`", example=True)
    drafts: bool | None = key("bool",
        "Review draft pull requests automatically too (a mention is always answered).",
        None, inherits="`false`", example=False)
    excluded_paths: tuple[str, ...] | None = key("strs",
        "Glob patterns of files left out of what is reviewed, **added** to the operator's "
        "`review.excluded_paths` (never removing one). Same syntax: `*` within a path "
        "segment, `**` across segments.",
        None, inherits="the operator's list alone",
        example=["docs/generated/**", "*.snap"])
    guidelines: str | None = key("str",
        "The repository's review guidelines file, relative to its root, read from the "
        "pull request's base (never its head).",
        None, pattern=re.compile(r"[^/][\s\S]*"), shape=_INSIDE,
        check=_inside_the_repository,
        inherits="the first of `REVIEW.md`, `.github/REVIEW.md`, `AGENTS.md`, `CLAUDE.md`",
        example="docs/review-guidelines.md")
    instructions: str | None = key("str",
        f"A short text for the reviewer (at most {MAX_INSTRUCTIONS} characters), given to "
        "the engine as the repository's words, like the guidelines, never as the "
        "system's.",
        None, maximum=MAX_INSTRUCTIONS, inherits="none",
        example="Prefer small functions. Flag any SQL built from strings.")
    path_instructions: tuple[PathInstruction, ...] | None = key("items",
        f"Review rules for some paths (at most {MAX_PATH_INSTRUCTIONS}): each is a `path` "
        "glob and the `instructions` for the files it matches, given to the engine only "
        "with those files, as the repository's words.",
        None, item=PathInstruction, maximum=MAX_PATH_INSTRUCTIONS, inherits="none",
        example=[{"path": "migrations/**",
                  "instructions": "Every migration must be reversible."}])
    min_severity: str | None = key("str?",
        "The least serious finding posted: `critical`, `major`, `minor` or `nit`. Those "
        "below are counted in the review body, not posted.",
        None, allowed=SEVERITIES,
        inherits="the operator's `review.min_severity` (`nit`: everything)",
        example="minor")
    max_findings: int | None = key("int",
        "At most this many findings posted, the most serious first (1–100); the rest are "
        "counted in the review body.",
        None, maximum=100, inherits="the operator's `review.max_findings` (100)",
        example=15)
    fail_on: str | None = key("str?",
        "A finding at or above this severity makes the check run conclude `failure`, so "
        "the check can gate merging; `null` never does.",
        None, name="checks.fail_on", allowed=SEVERITIES,
        inherits="the operator's `checks.fail_on`", example="major")
    #: ``checks.fail_on: null`` sets the key (to "never"), unlike a file without it.
    fail_on_set: bool = False
    language: str | None = key("str",
        "The language the review is written in, as a name or a code (`English`, `de`, "
        "`pt-BR`).",
        None, pattern=LANGUAGE,
        shape="a language's name or code (letters, spaces, hyphens; at most 40 characters)",
        inherits="English", example="English")

    def names(self) -> tuple[str, ...]:
        """The dotted names of the keys this file sets."""
        found = [k.name for field, k in FIELDS if field != "fail_on"
                 and getattr(self, field) is not None]
        if self.fail_on_set:
            found.append("checks.fail_on")
        return tuple(sorted(found))


#: ``(field, key)`` for each key, in the order the docs list them.
FIELDS: Final[tuple[tuple[str, Key], ...]] = tuple(
    (field, k) for field, (k,) in keys_of(RepoSettings))
KEYS: Final[tuple[Key, ...]] = tuple(k for _, k in FIELDS)
