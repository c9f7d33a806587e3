"""Reading a config document by walking the declarations (``schema.SECTIONS``).

For each section, each declared key is read with the reader its kind names, normalized,
checked (``check=``), and the section's checks across keys run (``checks.SECTION_CHECKS``);
then the unread keys are reported as unknown. Every problem is collected before anything
is refused, so an operator sees the whole list at once.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.config.checks import SECTION_CHECKS
from service.config.declare import Key, Section, combiner, keys_of
from service.config.errors import ConfigError, MissingCredentials
from service.config.reader import MISSING, show
from service.config.reader import Section as Reader
from service.config.schema import SECTIONS, Config
from service.config.secret import Secret
from service.config.secrets import read_secret, resolve, unregistered

__all__ = ["parse_config"]


def _dollars(s: Reader, name: str) -> float | None:
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


def _counts(s: Reader, k: Key) -> tuple[tuple[str, int], ...]:
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


def _read(s: Reader, k: Key, environ: Mapping[str, str], base_dir: Path) -> Any:
    """One key's value, by its kind (a failed read records its problem and returns a
    placeholder, so that the rest of the file is still read)."""
    default = None if k.required else k.default
    if k.kind == "int":
        return s.integer(k.name, None if k.required else int(k.default),  # type: ignore[call-overload]
                         minimum=k.minimum, maximum=k.maximum, hint=k.hint)
    if k.kind == "bool":
        return s.boolean(k.name, bool(k.default))
    if k.kind == "str":
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
    if k.kind == "secret":
        return read_secret(s, k.name, k.env, environ, base_dir, required=k.required,
                           pem=k.pem)
    raise ValueError(f"unknown key kind {k.kind!r}")  # pragma: no cover - schema bug


def _section(top: Reader, spec: Section, environ: Mapping[str, str], base_dir: Path,
             absent: list[str] | None) -> Any:
    """Read one section into its class. ``absent`` (the github section of an App not
    registered yet) collects the problems that only say so."""
    mark = top.mark()
    s = top.section(spec.name, required=spec.required, hint=spec.hint)
    if absent is not None:
        absent += s.since(mark)
    start = s.mark()
    values: dict[str, Any] = {}
    for field, declared in keys_of(spec.cls):
        read: list[Any] = []
        for k in declared:
            before = s.mark()
            value = _read(s, k, environ, base_dir)
            # An empty string is a failed read's placeholder (already reported); a list
            # that lost a bad item is still checked.
            if value is not None and value != "":
                if k.normalize is not None:
                    value = k.normalize(value)
                why = None if k.check is None else k.check(value)
                if isinstance(why, str):
                    s.problem(k.name, why)
                elif why:
                    for suffix, item_why in why:
                        s.problem(k.name + suffix, item_why)
            if absent is not None and k.registration:
                absent += s.since(before)
            read.append(value)
        values[field] = (read[0] if len(declared) == 1
                         else combiner(spec.cls, field)(tuple(read)))
    check = SECTION_CHECKS.get(spec.name)
    if check is not None:
        run, needs_valid = check
        if not needs_valid or not (s.failed_since(start) or s.quiet):
            run(values, s.problem)
    s.finish()
    if spec.name == "github" and values["private_key"] is None:
        values["private_key"] = Secret("")  # MissingCredentials' placeholder
    return spec.cls(**values)


def parse_config(data: object, environ: Mapping[str, str], base_dir: Path) -> Config:
    """Validate an already-parsed YAML document into a ``Config``.

    ``environ`` supplies the secrets not given as files; relative paths (secret files,
    ``store.path``) are resolved against ``base_dir``. Raises ``ConfigError`` listing every
    problem, each prefixed by its key path.
    """
    if data is None:
        raise ConfigError(["the config is empty"])
    if not isinstance(data, Mapping):
        raise ConfigError([f"the top level must be a mapping of sections, got {show(data)}"])
    problems: list[str] = []
    top = Reader(problems, "", data)
    absent: list[str] = []
    registering = unregistered(data.get("github", MISSING), environ, base_dir)
    sections: dict[str, Any] = {}
    # Sections are read in the order docs/CONFIG.md lists them, so problems come out
    # roughly in the order an operator reads the file.
    for spec in SECTIONS:
        sections[spec.name] = _section(top, spec, environ, base_dir,
                                       absent if spec.name == "github" else None)
    top.finish()
    if not registering:
        absent = []
    if problems and problems != absent:
        raise ConfigError(problems)
    store = sections["store"]
    sections["store"] = dataclasses.replace(store, path=str(resolve(base_dir, store.path)))
    config = Config(**sections)
    if problems:  # exactly the App's absent credentials: registration is what is left
        raise MissingCredentials(problems, config)
    return config
