"""Typed reads from GitHub JSON: a missing or mistyped field is a ``PayloadError``.

The rules read few fields, but they read them from untrusted input; one helper per JSON
type keeps every message naming the exact path (``pull_request.head.sha``) that was wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .decisions import PayloadError

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def mapping(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}.{key}: expected an object, got {_kind(value)}")
    return value


def optional_mapping(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}.{key}: expected an object or null, got {_kind(value)}")
    return value


def positive_int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    # bool is an int subclass; `true` is never an id.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PayloadError(f"{where}.{key}: expected a positive integer, got {_kind(value)}")
    return value


def string(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{where}.{key}: expected a non-empty string, got {_kind(value)}")
    return value


def optional_string(obj: Mapping[str, Any], key: str, where: str) -> str:
    """A string field that may be absent or null (then ``""``)."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PayloadError(f"{where}.{key}: expected a string or null, got {_kind(value)}")
    return value


def flag(obj: Mapping[str, Any], key: str, where: str) -> bool:
    """A boolean that may be absent (then ``False``), never a truthy non-boolean."""
    value = obj.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise PayloadError(f"{where}.{key}: expected a boolean, got {_kind(value)}")
    return value


def repo_name(value: object, where: str) -> str:
    """An ``owner/name`` string, as in ``repository.full_name``.

    Both halves are held to the characters GitHub allows (letters, digits, ``-``, ``_``,
    ``.``), which keeps ``:`` and ``/`` out and so keeps dedupe keys unambiguous.
    """
    if not isinstance(value, str):
        raise PayloadError(f"{where}: expected 'owner/name', got {_kind(value)}")
    if _REPO.fullmatch(value) is None:
        raise PayloadError(f"{where}: expected 'owner/name', got {value[:80]!r}")
    return value


def _kind(value: object) -> str:
    """Name the JSON type received, never the value (it may be long or sensitive)."""
    if value is None:
        return "null or nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return f"the number {value}"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
