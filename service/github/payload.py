"""GitHub's JSON, read field by field: a missing or mistyped field is a ``PayloadError``.

One set of readers for every payload and REST response the App reads (webhook bodies,
pull requests, comments, installations), so that every message names the exact path
(``pull_request.head.sha``) that was wrong, and names the JSON type received, never the
value (it may be long or sensitive).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["PayloadError", "flag", "github_time", "kind", "mapping", "optional_mapping",
           "optional_string", "positive_int", "repo_name", "string", "text"]


class PayloadError(ValueError):
    """A GitHub payload or REST object that lacks a field the App needs, or carries the
    wrong type, or a (correctly signed) body that is not a payload at all."""


_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def mapping(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}.{key}: expected an object, got {kind(value)}")
    return value


def optional_mapping(obj: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise PayloadError(f"{where}.{key}: expected an object or null, got {kind(value)}")
    return value


def positive_int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = obj.get(key)
    # bool is an int subclass; `true` is never an id.
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise PayloadError(f"{where}.{key}: expected a positive integer, got {kind(value)}")
    return value


def string(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{where}.{key}: expected a non-empty string, got {kind(value)}")
    return value


def text(obj: Mapping[str, Any], key: str, where: str) -> str:
    """A string field that must be there, possibly empty (a title)."""
    value = obj.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{where}.{key}: expected a string, got {kind(value)}")
    return value


def optional_string(obj: Mapping[str, Any], key: str, where: str) -> str:
    """A string field that may be absent or null (then ``""``)."""
    value = obj.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PayloadError(f"{where}.{key}: expected a string or null, got {kind(value)}")
    return value


def flag(obj: Mapping[str, Any], key: str, where: str) -> bool:
    """A boolean that may be absent (then ``False``), never a truthy non-boolean."""
    value = obj.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise PayloadError(f"{where}.{key}: expected a boolean, got {kind(value)}")
    return value


def repo_name(value: object, where: str) -> str:
    """An ``owner/name`` string, as in ``repository.full_name``.

    Both halves are held to the characters GitHub allows (letters, digits, ``-``, ``_``,
    ``.``), which keeps ``:`` and ``/`` out and so keeps dedupe keys unambiguous.
    """
    if not isinstance(value, str):
        raise PayloadError(f"{where}: expected 'owner/name', got {kind(value)}")
    if _REPO.fullmatch(value) is None:
        raise PayloadError(f"{where}: expected 'owner/name', got {value[:80]!r}")
    return value


def kind(value: object) -> str:
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


def github_time(obj: Mapping[str, Any], key: str, what: str) -> datetime:
    """A timestamp field of a REST object (``2024-05-01T12:00:00Z``) as aware UTC."""
    value = obj.get(key)
    if not isinstance(value, str):
        raise PayloadError(f"{what}.{key}: expected an ISO-8601 timestamp, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise PayloadError(f"{what}.{key}: not an ISO-8601 timestamp: {value!r}") from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise PayloadError(f"{what}.{key}: timestamp without a zone: {value!r}")
    return parsed.astimezone(UTC)
