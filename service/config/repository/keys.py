"""The keys of a repository's ``.github/pr-review-agent.yml``, each declared once.

A repository (or its organisation's ``.github`` repository) says how its pull requests are
reviewed; the operator's config says what any review may cost, and which of these keys a
repository may set at all. Every key is optional: a key the file does not set is taken
from the organisation's file, then from the operator's config. ``RepoSettings`` holds one
file's keys, ``None`` for each it does not set. docs/REPOSITORY-CONFIG.md's key table and
the JSON Schema published for editors are rendered from ``KEYS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["FILE_PATH", "KEYS", "LANGUAGE", "MAX_FILE_BYTES", "MAX_INSTRUCTIONS", "RepoKey",
           "RepoSettings"]

#: Where the file is read from: the default branch of the repository, and of the
#: organisation's ``.github`` repository for its defaults.
FILE_PATH: Final = ".github/pr-review-agent.yml"
#: A file larger than this is refused whole (GitHub serves up to 1 MB through the API).
MAX_FILE_BYTES: Final = 64 * 1024
#: The longest ``instructions`` (characters): a few paragraphs, not a second prompt.
MAX_INSTRUCTIONS: Final = 2000

Kind = Literal["bool", "globs", "path", "text", "severity", "count", "line"]


@dataclass(frozen=True)
class RepoKey:
    """One key: its dotted name, kind, what it does, and what it is when no file sets it."""

    name: str          # "checks.fail_on" for a key inside a mapping
    kind: Kind
    doc: str
    default: str       # in words: the operator's value, or the built-in one
    example: object


KEYS: Final[tuple[RepoKey, ...]] = (
    RepoKey("auto_review", "bool",
            "Review a pull request when it opens, reopens or is marked ready for review.",
            "the operator's `triggers.auto_review`", False),
    RepoKey("on_push", "bool",
            "Review again, incrementally, when commits are pushed to an open pull request.",
            "the operator's `triggers.on_push`", True),
    RepoKey("drafts", "bool",
            "Review draft pull requests automatically too (a mention is always answered).",
            "`false`", False),
    RepoKey("excluded_paths", "globs",
            "Glob patterns of files left out of what is reviewed, **added** to the operator's "
            "`review.excluded_paths` (never removing one). Same syntax: `*` within a path "
            "segment, `**` across segments.",
            "the operator's list alone", ["docs/generated/**", "*.snap"]),
    RepoKey("guidelines", "path",
            "The repository's review guidelines file, relative to its root, read from the "
            "pull request's base (never its head).",
            "the first of `REVIEW.md`, `.github/REVIEW.md`, `CLAUDE.md`",
            "docs/review-guidelines.md"),
    RepoKey("instructions", "text",
            f"A short text for the reviewer (at most {MAX_INSTRUCTIONS} characters), given to "
            "the engine as the repository's words, like the guidelines, never as the "
            "system's.",
            "none", "Prefer small functions. Flag any SQL built from strings."),
    RepoKey("min_severity", "severity",
            "The least serious finding posted: `critical`, `major`, `minor` or `nit`. Those "
            "below are counted in the review body, not posted.",
            "the operator's `review.min_severity` (`nit`: everything)", "minor"),
    RepoKey("max_findings", "count",
            "At most this many findings posted, the most serious first (1–100); the rest are "
            "counted in the review body.",
            "the operator's `review.max_findings` (100)", 15),
    RepoKey("checks.fail_on", "severity",
            "A finding at or above this severity makes the check run conclude `failure`, so "
            "the check can gate merging; `null` never does.",
            "the operator's `checks.fail_on`", "major"),
    RepoKey("language", "line",
            "The language the review is written in, as a name or a code (`English`, `de`, "
            "`pt-BR`).",
            "English", "English"),
)

#: Characters a ``language`` may use: letters, digits, spaces and hyphens.
LANGUAGE: Final = re.compile(r"[\w][\w \-]{0,39}")


@dataclass(frozen=True)
class RepoSettings:
    """The keys one file sets; ``None`` for every key it leaves to the next level."""

    auto_review: bool | None = None
    on_push: bool | None = None
    drafts: bool | None = None
    excluded_paths: tuple[str, ...] | None = None
    guidelines: str | None = None
    instructions: str | None = None
    min_severity: str | None = None
    max_findings: int | None = None
    fail_on: str | None = None
    fail_on_set: bool = False   # ``checks.fail_on: null`` sets it to "never"
    language: str | None = None

    def names(self) -> tuple[str, ...]:
        """The dotted names of the keys this file sets."""
        found = [k.name for k in KEYS if k.name != "checks.fail_on"
                 and getattr(self, k.name) is not None]
        if self.fail_on_set:
            found.append("checks.fail_on")
        return tuple(sorted(found))

