"""Reading a config document by walking the declarations (``schema.SECTIONS``).

For each section, each declared key is read (``read_key``: its kind, bounds, ``normalize``
and ``check``), and the section's checks across keys run (``checks.SECTION_CHECKS``);
then the unread keys are reported as unknown. Every problem is collected before anything
is refused, so an operator sees the whole list at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.config.checks import SECTION_CHECKS
from service.config.declare import Section, combiner, keys_of
from service.config.errors import ConfigError, MissingCredentials
from service.config.read_key import read_key
from service.config.reader import MISSING, show
from service.config.reader import Section as Reader
from service.config.schema import SECTIONS, Config
from service.config.secret import Secret
from service.config.secrets import resolve, unregistered

__all__ = ["parse_config"]


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
            value = read_key(s, k, environ, base_dir)
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
