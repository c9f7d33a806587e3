"""Typed reads of one YAML mapping that record problems instead of raising.

Every read names a key as known, so that ``finish()`` can report the keys nobody read as
unknown, with the nearest known key as a suggestion. The validator (``validate.py``)
drives it from the declarations; nothing here knows a key by name.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from typing import Final

__all__ = ["MISSING", "Section", "show"]

MISSING: Final = object()
"""What a read returns for a key the mapping does not have."""


def show(value: object) -> str:
    """A value as the operator wrote it, short: for "got ..." in a problem message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


class Section:
    """One mapping of the YAML tree: typed reads that record problems instead of raising.

    Every read names a key as known; ``finish()`` then reports the keys nobody read as
    unknown, with the nearest known key as a suggestion. A section that is missing or not
    a mapping is read as empty and ``quiet``: its children do not each report "required"
    on top of the one problem already recorded for the section.
    """

    def __init__(
        self, problems: list[str], path: str, data: Mapping[object, object], *, quiet: bool = False
    ) -> None:
        self._problems = problems
        self._path = path
        self._data = data
        self._known: list[str] = []
        self.quiet = quiet

    def key_path(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def problem(self, key: str, message: str) -> None:
        self._problems.append(f"{self.key_path(key)}: {message}")

    def mark(self) -> int:
        return len(self._problems)

    def failed_since(self, mark: int) -> bool:
        return len(self._problems) > mark

    def since(self, mark: int) -> list[str]:
        """The problems recorded (anywhere in the tree) after ``mark``."""
        return self._problems[mark:]

    def peek(self, key: str) -> object:
        """The raw value of ``key`` (or ``MISSING``) without counting it as read."""
        return self._data.get(key, MISSING)

    def required(self, key: str, hint: str = "") -> None:
        if not self.quiet:
            self.problem(key, f"required{f' ({hint})' if hint else ''}")

    def get(self, key: str) -> object:
        self._known.append(key)
        return self._data.get(key, MISSING)

    def section(self, key: str, *, required: bool = False, hint: str = "") -> Section:
        value = self.get(key)
        path = self.key_path(key)
        if isinstance(value, Mapping):
            return Section(self._problems, path, value)
        if value is MISSING:
            if required and not self.quiet:
                self.problem(key, f"required section is missing{f' ({hint})' if hint else ''}")
            return Section(self._problems, path, {}, quiet=required)
        self.problem(key, f"must be a mapping, got {show(value)}")
        return Section(self._problems, path, {}, quiet=True)

    def nested(self, where: str, data: Mapping[object, object]) -> Section:
        """A mapping inside this one that is not a section of its own (a list's item,
        ``where`` = ``rules[2]``): its problems are recorded with this file's."""
        return Section(self._problems, self.key_path(where), data)

    def integer(
        self,
        key: str,
        default: int | None,
        *,
        minimum: int = 1,
        maximum: int | None = None,
        hint: str = "",
    ) -> int:
        """An int within bounds; ``default=None`` makes the key required. bool is refused."""
        value = self.get(key)
        if value is MISSING:
            if default is None:
                self.required(key, hint)
                return 0
            return default
        # bool subclasses int: without this check `weekly_tokens: true` is a 1-token ceiling.
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key, f"must be an integer, got {show(value)}")
            return 0
        if value < minimum or (maximum is not None and value > maximum):
            bounds = (
                f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            )
            self.problem(key, f"must be {bounds}, got {value}")
            return 0
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is MISSING:
            return default
        if not isinstance(value, bool):
            self.problem(key, f"must be true or false, got {show(value)}")
            return default
        return value

    def string(self, key: str, default: str) -> str:
        value = self.get(key)
        if value is MISSING:
            return default
        return self._check_string(key, value)

    def optional_string(self, key: str) -> str | None:
        value = self.get(key)
        if value is MISSING or value is None:
            return None
        return self._check_string(key, value)

    def _check_string(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            self.problem(key, f"must be a string, got {show(value)}")
            return ""
        if not value.strip():
            self.problem(key, "must not be empty")
            return ""
        return value

    def strings(
        self,
        key: str,
        default: tuple[str, ...],
        *,
        allowed: tuple[str, ...] = (),
        pattern: re.Pattern[str] | None = None,
        shape: str = "",
        fold_case: bool = False,
    ) -> tuple[str, ...]:
        """A list of non-empty strings, each in ``allowed`` or matching ``pattern``, no repeats."""
        value = self.get(key)
        if value is MISSING:
            return default
        if not isinstance(value, list):
            self.problem(key, f"must be a list, got {show(value)}")
            return default
        items: list[str] = []
        seen: set[str] = set()
        for index, item in enumerate(value):
            where = f"{key}[{index}]"
            if not isinstance(item, str) or not item.strip():
                self.problem(where, f"must be a non-empty string, got {show(item)}")
                continue
            if allowed and item not in allowed:
                close = difflib.get_close_matches(item.upper(), allowed, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]}?)" if close else ""
                self.problem(where, f"must be one of {', '.join(allowed)}, got {show(item)}{hint}")
                continue
            if pattern is not None and not pattern.fullmatch(item):
                self.problem(where, f"must look like {shape}, got {show(item)}")
                continue
            folded = item.casefold() if fold_case else item
            if folded in seen:
                self.problem(where, f"{show(item)} is listed more than once")
                continue
            seen.add(folded)
            items.append(item)
        return tuple(items)

    def finish(self) -> None:
        """Report every key of this mapping that no read asked for."""
        for key in self._data:
            if not isinstance(key, str):
                self._problems.append(f"{self._path or '(top level)'}: unknown key {show(key)}")
                continue
            if key in self._known:
                continue
            close = difflib.get_close_matches(key, self._known, n=1, cutoff=0.6)
            if close:
                self.problem(key, f"unknown key (did you mean {close[0]}?)")
            else:
                self.problem(key, f"unknown key (valid keys: {', '.join(sorted(self._known))})")
