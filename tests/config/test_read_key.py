"""One key read by its declaration: the kind's typed read, then the declared bounds,
``normalize`` and ``check`` — the same for the operator's file and a repository's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from service.config.declare import Key
from service.config.read_key import read_key
from service.config.reader import Section


def _read(k: Key, data: dict[str, Any]) -> tuple[Any, list[str]]:
    problems: list[str] = []
    value = read_key(Section(problems, "top", data), k, {}, Path())
    return value, problems


CHOICE = Key(name="kind", kind="str", doc="", default="a", allowed=("a", "b"))
NULLABLE = Key(name="kind", kind="str?", doc="", default=None, allowed=("a", "b"))
SHAPED = Key(name="lang", kind="str", doc="", default="en", pattern=re.compile(r"[a-z]{2}"),
             shape="a two-letter code")
SHORT = Key(name="text", kind="str", doc="", default="x", maximum=5)


@pytest.mark.parametrize(("k", "data", "value", "problems"), [
    (CHOICE, {}, "a", []),
    (CHOICE, {"kind": "b"}, "b", []),
    (CHOICE, {"kind": "c"}, "", ['top.kind: must be one of a, b, got "c"']),
    (CHOICE, {"kind": 3}, "", ["top.kind: must be a string, got 3"]),
    (NULLABLE, {"kind": None}, None, []),
    (NULLABLE, {"kind": "z"}, "", ['top.kind: must be one of a, b, got "z"']),
    (SHAPED, {"lang": "de"}, "de", []),
    (SHAPED, {"lang": "deu"}, "", ['top.lang: must be a two-letter code, got "deu"']),
    (SHORT, {"text": "hello"}, "hello", []),
    (SHORT, {"text": "hello!"}, "", ["top.text: must be at most 5 characters, got 6"]),
])
def test_a_string_is_bounded_by_what_its_key_declares(k: Key, data: dict[str, Any],
                                                       value: Any, problems: list[str]) -> None:
    assert _read(k, data) == (value, problems)


def test_a_default_is_not_bounded_again() -> None:
    """The declared default is the declaration's own: only what a file says is judged."""
    odd = Key(name="kind", kind="str", doc="", default="built-in", allowed=("a",))
    assert _read(odd, {}) == ("built-in", [])


def test_normalize_runs_before_check_and_check_names_items() -> None:
    seen: list[object] = []

    def check(value: tuple[str, ...]) -> list[tuple[str, str]]:
        seen.append(value)
        return [("[1]", "is not allowed here")]

    k = Key(name="paths", kind="strs", doc="", default=(), check=check,
            normalize=lambda v: tuple(p.rstrip("/") for p in v))
    value, problems = _read(k, {"paths": ["a/", "b/"]})
    assert value == ("a", "b") and seen == [("a", "b")]
    assert problems == ["top.paths[1]: is not allowed here"]


def test_a_failed_typed_read_is_not_checked_again() -> None:
    calls: list[object] = []
    k = Key(name="name", kind="str", doc="", default="x",
            check=lambda v: calls.append(v) or "never")
    assert _read(k, {"name": 5}) == ("", ["top.name: must be a string, got 5"])
    assert calls == []


def test_an_int_keeps_its_bounds_and_a_bool_is_not_an_int() -> None:
    k = Key(name="n", kind="int", doc="", default=3, maximum=10)
    assert _read(k, {}) == (3, [])
    assert _read(k, {"n": 11}) == (0, ["top.n: must be between 1 and 10, got 11"])
    assert _read(k, {"n": True}) == (0, ["top.n: must be an integer, got true"])
