"""Reading one declared key from a YAML mapping, by its kind — for both config files.

The operator's ``config.yaml`` (``validate.py``) and a repository's
``.github/pr-review-agent.yml`` (``repository/parse.py``) declare their keys the same way
(``declare.key``) and read each one here: the kind's typed read, then the declared bounds
(``allowed``, ``pattern``, ``maximum``), ``normalize`` and ``check``. A problem is recorded
on the section, never raised, so that a whole file's problems are listed at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.config.declare import Key, keys_of
from service.config.reader import MISSING, Section, show
from service.config.secrets import read_secret

__all__ = ["read_key"]


def _dollars(s: Section, name: str) -> float | None:
    """A positive, finite number of dollars, or None when absent or null."""
    value = s.get(name)
    if value is MISSING or value is None:
        return None
    # bool subclasses int: `monthly_usd: true` must not become a one-dollar cap.
    if isinstance(value, bool) or not isinstance(value, int | float):
        s.problem(name, f"must be a number of dollars, got {show(value)}")
        return None
    if not math.isfinite(value) or value <= 0:
        s.problem(name, f"must be a number of dollars greater than 0, got {show(value)}")
        return None
    return float(value)


def _counts(s: Section, k: Key) -> tuple[tuple[str, int], ...]:
    """A mapping of names (``k.pattern``, case folded) to whole numbers of at least
    ``k.minimum``, as sorted pairs (a frozen config must hash); ``{}`` when absent."""
    value = s.get(k.name)
    if value is MISSING or value is None:
        return ()
    if not isinstance(value, Mapping):
        s.problem(k.name, f"must be a mapping of {k.shape} to a number, got {show(value)}")
        return ()
    found: dict[str, int] = {}
    for name, count in value.items():
        where = f"{k.name}.{name}"
        if not isinstance(name, str) or (k.pattern is not None
                                         and not k.pattern.fullmatch(name)):
            s.problem(k.name, f"{show(name)} is not {k.shape}")
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < k.minimum:
            s.problem(where, f"must be a whole number of at least {k.minimum}, "
                             f"got {show(count)}")
            continue
        folded = name.lower() if k.fold_case else name
        if folded in found:
            s.problem(where, "is given twice (names are compared without case)")
            continue
        found[folded] = count
    return tuple(sorted(found.items()))


def _items(s: Section, k: Key, environ: Mapping[str, str], base_dir: Path
           ) -> tuple[Any, ...]:
    """A list of mappings, each read into ``k.item`` by its declared keys (an item with
    a problem is left out, its problems recorded with its index: ``rules[2].path``)."""
    value = s.get(k.name)
    if value is MISSING or value is None:
        return ()
    if not isinstance(value, list):
        s.problem(k.name, f"must be a list of mappings, got {show(value)}")
        return ()
    if k.maximum is not None and len(value) > k.maximum:
        s.problem(k.name, f"must have at most {k.maximum} items, got {len(value)}")
        return ()
    assert k.item is not None, "an items key declares its item"
    out = []
    for index, raw in enumerate(value):
        where = f"{k.name}[{index}]"
        if not isinstance(raw, Mapping):
            s.problem(where, f"must be a mapping, got {show(raw)}")
            continue
        item = s.nested(where, raw)
        mark = item.mark()
        fields = {attr: read_key(item, declared, environ, base_dir)
                  for attr, (declared,) in keys_of(k.item)}
        item.finish()
        if not item.failed_since(mark):
            out.append(k.item(**fields))
    return tuple(out)


def _string_bounds(k: Key, value: str) -> str | None:
    """Why a well-typed string is outside what ``k`` declares, or None."""
    if k.allowed and value not in k.allowed:
        return f"must be one of {', '.join(k.allowed)}, got {show(value)}"
    if k.pattern is not None and not k.pattern.fullmatch(value):
        return f"must be {k.shape}, got {show(value)}"
    if k.maximum is not None and len(value) > k.maximum:
        return f"must be at most {k.maximum} characters, got {len(value)}"
    return None


def _typed(s: Section, k: Key, environ: Mapping[str, str], base_dir: Path) -> Any:
    """The kind's typed read (a failed read records its problem and returns a
    placeholder, so that the rest of the file is still read)."""
    default = None if k.required else k.default
    if k.kind == "int":
        return s.integer(k.name, default if isinstance(default, int) else None,
                         minimum=k.minimum, maximum=k.maximum, hint=k.hint)
    if k.kind == "bool":
        return s.boolean(k.name, bool(default))
    if k.kind == "str":
        if k.required and s.peek(k.name) is MISSING:
            s.get(k.name)  # known, for the unknown-key check
            s.required(k.name, k.hint)
            return ""
        return s.string(k.name, str(default))
    if k.kind == "str?":
        return s.optional_string(k.name)
    if k.kind == "strs":
        strings: tuple[str, ...] = default if isinstance(default, tuple) else ()
        return s.strings(k.name, strings, allowed=k.allowed, pattern=k.pattern,
                         shape=k.shape, fold_case=k.fold_case)
    if k.kind == "usd":
        return _dollars(s, k.name)
    if k.kind == "counts":
        return _counts(s, k)
    if k.kind == "items":
        return _items(s, k, environ, base_dir)
    if k.kind == "secret":
        return read_secret(s, k.name, k.env, environ, base_dir, required=k.required,
                           pem=k.pem)
    raise ValueError(f"unknown key kind {k.kind!r}")  # pragma: no cover - declaration bug


def read_key(s: Section, k: Key, environ: Mapping[str, str], base_dir: Path) -> Any:
    """One key's value from ``s``: read by its kind, bounded, normalized and checked.

    An empty string is a failed read's placeholder (already reported) and is not checked
    again; a list that lost a bad item still is."""
    value = _typed(s, k, environ, base_dir)
    if value is None or value == "":
        return value
    if k.kind in ("str", "str?") and s.peek(k.name) is not MISSING:
        why = _string_bounds(k, value)
        if why is not None:
            s.problem(k.name, why)
            return ""
    if k.normalize is not None:
        value = k.normalize(value)
    checked = None if k.check is None else k.check(value)
    if isinstance(checked, str):
        s.problem(k.name, checked)
    elif checked:
        for suffix, item_why in checked:
            s.problem(k.name + suffix, item_why)
    return value
