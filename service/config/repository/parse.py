"""Reading one ``.github/pr-review-agent.yml``: strict, every problem with its key and line.

A broken file never silently changes a review: ``parse_repository_file`` returns the keys
it could read *and* every problem it found — not YAML, too large, a key repeated, a key
that does not exist (with the nearest known one), a value of the wrong kind — each with
its key path and line. Callers decide what a problem means: the review goes on with the
defaults and says so; ``check-config --repository-file`` prints them and fails.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar

import yaml

from service.config.reader import MISSING, Section, show
from service.config.repository.keys import LANGUAGE, MAX_FILE_BYTES, MAX_INSTRUCTIONS, RepoSettings
from service.config.strict_yaml import at_line, key_lines, load_strict, yaml_problem
from service.model.severity import SEVERITIES

__all__ = ["Parsed", "parse_repository_file"]

T = TypeVar("T")
_SEGMENT: Final = re.compile(r"^[^/\\]+$")


@dataclass(frozen=True)
class Parsed:
    """What one file says and what is wrong with it: ``settings`` are the file's keys when
    it has no problem, and none of them when it has any (the defaults then apply)."""

    settings: RepoSettings
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems


def parse_repository_file(text: str | bytes) -> Parsed:
    """Read a repository config file (see the module docstring)."""
    raw = text.encode() if isinstance(text, str) else text
    if len(raw) > MAX_FILE_BYTES:
        return Parsed(RepoSettings(), (
            f"the file is {len(raw):,} bytes, more than the {MAX_FILE_BYTES:,} a repository "
            "config may have".replace(",", " "),))
    try:
        decoded = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Parsed(RepoSettings(), (f"the file is not UTF-8 text (byte {exc.start})",))
    try:
        data, duplicates = load_strict(decoded)
    except yaml.YAMLError as exc:
        return Parsed(RepoSettings(), (yaml_problem(exc),))
    if data is None:
        return Parsed(RepoSettings(), tuple(duplicates))
    if not isinstance(data, Mapping):
        return Parsed(RepoSettings(), (f"the file must be a mapping of keys, got {show(data)}",))
    problems: list[str] = []
    settings = _read(Section(problems, "", data))
    lines = key_lines(decoded)
    found = tuple(duplicates) + tuple(at_line(p, lines) for p in problems)
    # A file with any problem is not half applied: the review runs with the defaults.
    return Parsed(RepoSettings() if found else settings, found)


def _read(top: Section) -> RepoSettings:
    checks = top.section("checks")
    fail_on_raw = checks.peek("fail_on")
    fail_on = _severity(checks, "fail_on")
    checks.finish()
    settings = RepoSettings(
        auto_review=_flag(top, "auto_review"), on_push=_flag(top, "on_push"),
        drafts=_flag(top, "drafts"), excluded_paths=_globs(top, "excluded_paths"),
        guidelines=_path(top, "guidelines"), instructions=_instructions(top, "instructions"),
        min_severity=_severity(top, "min_severity"),
        max_findings=_count(top, "max_findings"), fail_on=fail_on,
        fail_on_set=fail_on_raw is None or fail_on is not None,
        language=_language(top, "language"))
    top.finish()
    return settings


def _maybe(s: Section, key: str, read: Callable[[], T]) -> T | None:
    """``read()`` of a key the file sets; None when it does not set it, or the read
    recorded a problem (the reader's own typed reads say what is wrong)."""
    if s.peek(key) is MISSING:
        s.get(key)  # known, for the unknown-key check
        return None
    mark = s.mark()
    value = read()
    return None if s.failed_since(mark) else value


def _flag(s: Section, key: str) -> bool | None:
    return _maybe(s, key, lambda: s.boolean(key, False))


def _text(s: Section, key: str) -> str | None:
    return _maybe(s, key, lambda: s.string(key, ""))


def _globs(s: Section, key: str) -> tuple[str, ...] | None:
    return _maybe(s, key, lambda: s.strings(key, ()))


def _count(s: Section, key: str) -> int | None:
    return _maybe(s, key, lambda: s.integer(key, None, minimum=1, maximum=100))


def _path(s: Section, key: str) -> str | None:
    value = _text(s, key)
    if value is None:
        return None
    parts = value.split("/")
    if value.startswith("/") or any(not _SEGMENT.match(p) or p in (".", "..") for p in parts):
        s.problem(key, f"must be a file path inside the repository, like "
                       f"docs/review.md, got {show(value)}")
        return None
    return value


def _instructions(s: Section, key: str) -> str | None:
    value = _text(s, key)
    if value is not None and len(value) > MAX_INSTRUCTIONS:
        s.problem(key, f"must be at most {MAX_INSTRUCTIONS} characters, got {len(value)}")
        return None
    return value


def _severity(s: Section, key: str) -> str | None:
    value = s.get(key)
    if value is MISSING or value is None:
        return None
    if value not in SEVERITIES:
        s.problem(key, f"must be one of {', '.join(SEVERITIES)}, got {show(value)}")
        return None
    return str(value)


def _language(s: Section, key: str) -> str | None:
    value = _text(s, key)
    if value is not None and not LANGUAGE.fullmatch(value):
        s.problem(key, "must be a language's name or code (letters, spaces, hyphens; at "
                       f"most 40 characters), got {show(value)}")
        return None
    return value
