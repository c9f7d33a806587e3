"""Reading one ``.github/pr-review-agent.yml``: strict, every problem with its key and line.

A broken file never silently changes a review: ``parse_repository_file`` returns the keys
it could read *and* every problem it found — not YAML, too large, a key repeated, a key
that does not exist (with the nearest known one), a value of the wrong kind — each with
its key path and line. Callers decide what a problem means: the review goes on with the
defaults and says so; ``check-config --repository-file`` prints them and fails.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from service.config.declare import Key
from service.config.read_key import read_key
from service.config.reader import MISSING, Section, show
from service.config.repository.keys import FIELDS, MAX_FILE_BYTES, RepoSettings
from service.config.strict_yaml import at_line, key_lines, load_strict, yaml_problem

__all__ = ["Parsed", "parse_repository_file"]



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


def _leaf(declared: Key) -> tuple[str, Key]:
    """The mapping a key sits in (``""`` for the top level) and the key as named there."""
    parent, _, name = declared.name.rpartition(".")
    return parent, dataclasses.replace(declared, name=name)


#: ``(field, mapping, key as named in that mapping)`` for each declared key.
_LEAVES: Final = tuple((attr, *_leaf(declared)) for attr, declared in FIELDS)


def _read(top: Section) -> RepoSettings:
    """The keys the file sets, each read as declared (``read_key``); a key it does not set
    stays None. ``checks.fail_on`` is read inside the file's ``checks`` mapping."""
    inside: dict[str, Section] = {}
    values: dict[str, object] = {}
    for attr, parent, k in _LEAVES:
        if parent and parent not in inside:
            inside[parent] = top.section(parent)
        s = inside[parent] if parent else top
        if s.peek(k.name) is MISSING:
            s.get(k.name)  # known, for the unknown-key check
            continue
        mark = s.mark()
        # A repository file names no secret: no environment, no files beside it.
        value = read_key(s, k, {}, Path())
        if not s.failed_since(mark):
            values[attr] = value
    for section in inside.values():
        section.finish()
    top.finish()
    # ``checks.fail_on: null`` sets the key, to "never fail".
    return RepoSettings(**values, fail_on_set="fail_on" in values)  # type: ignore[arg-type]
