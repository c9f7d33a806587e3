"""Organisation → repository → operator: the settings a review runs with (pure).

The organisation's file (``<owner>/.github``) gives defaults, the repository's file
overrides them key by key, and the operator's ``repository_config.allow`` decides which
keys either may set at all: a key left out of it is ignored where a file sets it, and the
review says so. A file with any problem is not applied at all (``parse``), and neither is
one GitHub would not give (a 403, a directory at the path): the review runs with what the
other file and the operator say, and names the problem — never a silent change.

``Effective`` is what the worker, the ingest paths and the publisher read; ``notes`` are
the lines the check run and a mention's reply show.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from service.config.posting import ChecksConfig
from service.config.repository.keys import FIELDS, FILE_PATH, RepoSettings
from service.config.repository.parse import Parsed
from service.config.schema import TriggersConfig

__all__ = ["Effective", "RepoTriggers", "Source", "merge", "triggers"]

_FIELDS = {k.name: field for field, k in FIELDS}


@dataclass(frozen=True)
class Source:
    """One file as read: ``parsed`` is None when there is no such file; ``unreadable``
    says why GitHub's answer could not be used (nothing of the file is then applied)."""

    label: str                    # what the notes call it: ".github/pr-review-agent.yml"
    parsed: Parsed | None = None
    unreadable: str | None = None


@dataclass(frozen=True)
class Effective:
    """The keys in force for one repository, and what its files got wrong."""

    settings: RepoSettings = field(default_factory=RepoSettings)
    problems: tuple[str, ...] = ()   # "<file>: line 4: checks.fail_on: must be one of …"
    ignored: tuple[str, ...] = ()    # "<file>: auto_review" (not allowed by the operator)
    applied: tuple[str, ...] = ()    # the files whose keys are in force

    @property
    def notes(self) -> tuple[str, ...]:
        """What a person should be told: each problem (the file was not applied), each key
        the operator does not let a repository set."""
        out = [f"{p} (none of this file's keys were applied)" for p in self.problems]
        out += [f"{i}: not applied (the operator does not let a repository set this key)"
                for i in self.ignored]
        return tuple(out)

    def fail_on(self, operator: ChecksConfig) -> str | None:
        """``checks.fail_on`` in force: the files' when one sets it (``null`` included)."""
        return self.settings.fail_on if self.settings.fail_on_set else operator.fail_on


@dataclass(frozen=True)
class RepoTriggers:
    """The automatic-review switches for one repository."""

    auto_review: bool
    on_push: bool
    drafts: bool


def triggers(operator: TriggersConfig, settings: RepoSettings) -> RepoTriggers:
    """The operator's switches with a repository's in their place where it sets them."""
    return RepoTriggers(
        auto_review=operator.auto_review if settings.auto_review is None
        else settings.auto_review,
        on_push=operator.on_push if settings.on_push is None else settings.on_push,
        drafts=bool(settings.drafts),
    )


def _allowed(settings: RepoSettings, allow: frozenset[str]) -> tuple[RepoSettings, list[str]]:
    """``settings`` without the keys ``allow`` leaves out, and the names it dropped."""
    dropped = [name for name in settings.names() if name not in allow]
    changes: dict[str, object] = {_FIELDS[name]: None for name in dropped}
    if "checks.fail_on" in dropped:
        changes["fail_on_set"] = False
    return dataclasses.replace(settings, **changes), dropped  # type: ignore[arg-type]


def _over(base: RepoSettings, top: RepoSettings) -> RepoSettings:
    """``top``'s keys over ``base``'s, key by key."""
    changes = {f: getattr(top, f) for f in set(_FIELDS.values()) if getattr(top, f) is not None}
    if top.fail_on_set:
        changes["fail_on"], changes["fail_on_set"] = top.fail_on, True
    return dataclasses.replace(base, **changes)


def merge(org: Source | None, repo: Source | None, allow: frozenset[str]) -> Effective:
    """The organisation's file, then the repository's over it, filtered by ``allow``."""
    settings, problems, ignored, applied = RepoSettings(), [], [], []
    for source in (org, repo):
        if source is None:
            continue
        if source.unreadable is not None:
            problems.append(f"{source.label}: {source.unreadable}")
            continue
        if source.parsed is None:
            continue
        if not source.parsed.ok:
            problems += [f"{source.label}: {p}" for p in source.parsed.problems]
            continue
        kept, dropped = _allowed(source.parsed.settings, allow)
        ignored += [f"{source.label}: {name}" for name in dropped]
        settings = _over(settings, kept)
        applied.append(source.label)
    return Effective(settings=settings, problems=tuple(problems), ignored=tuple(ignored),
                     applied=tuple(applied))


def org_label(owner: str) -> str:
    """How notes name the organisation's file."""
    return f"{owner}/.github: {FILE_PATH}"
