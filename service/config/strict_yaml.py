"""The config file itself: strict YAML, read from disk, then validated.

PyYAML keeps the last of two equal keys without a word; this loader records every
repeated key as a problem instead, because a silently ignored setting is a setting the
operator believes is in force and is not.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from service.config.errors import ConfigError
from service.config.reader import show
from service.config.schema import Config
from service.config.secrets import read_text
from service.config.validate import parse_config

__all__ = ["at_line", "key_lines", "load_config", "load_strict", "with_port", "yaml_problem"]

_KEY_PATH: Final = re.compile(r"^([\w.\[\]]+): (.*)$", re.S)


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key repeated in one mapping is recorded, not overwritten."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[object, object]:
    loader.flatten_mapping(node)
    seen: set[object] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            key = loader.construct_object(key_node)
            if key in seen:
                mark = key_node.start_mark
                loader.duplicates.append(
                    f"line {mark.line + 1}, column {mark.column + 1}: "
                    f"duplicate key {show(key)} (only the last one would take effect)"
                )
            seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str]) -> Config:
    """Read the YAML file at ``path`` and validate it (see ``parse_config``).

    Relative paths inside the file resolve against the file's own directory, so a config
    behaves the same whatever the working directory of the process reading it.
    """
    file = Path(path)
    try:
        text = read_text(file)
    except ValueError as exc:
        raise ConfigError([f"config file: {exc}"]) from None
    try:
        data, duplicates = load_strict(text)
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(exc)]) from None
    if data is None:
        raise ConfigError([f"config file: {file} is empty"])
    # abspath, not resolve(): a config reached through a symlink (a Kubernetes secret mount)
    # keeps its paths relative to where the operator put it, not to the link's target.
    base_dir = Path(os.path.abspath(file)).parent
    try:
        config = parse_config(data, environ, base_dir)
    except ConfigError as exc:
        lines = key_lines(text)
        exc.problems = [at_line(problem, lines) for problem in exc.problems]
        if exc.registration_needed and not duplicates:
            raise
        raise ConfigError(duplicates + exc.problems) from None
    if duplicates:
        raise ConfigError(duplicates)
    return config


def load_strict(text: str) -> tuple[object, list[str]]:
    """The YAML document in ``text``, and a problem for every key repeated in one mapping
    (with its line and column). Raises ``yaml.YAMLError`` when it is not YAML."""
    loader = _StrictLoader(text)
    try:
        return loader.get_single_data(), loader.duplicates
    finally:
        loader.dispose()


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong with a document that is not YAML, with the line and column."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {what}"
    return f"invalid YAML: {exc}"


def with_port(config: Config, port: int | None) -> Config:
    """``config`` with ``server.port`` replaced (``serve --port``); unchanged for None."""
    if port is None:
        return config
    if not 1 <= port <= 65535:
        raise ValueError(f"port must be between 1 and 65535, got {port}")
    return dataclasses.replace(config, server=dataclasses.replace(config.server, port=port))


def key_lines(text: str) -> dict[str, int]:
    """Each key path's line (1-based), from the document's node tree (of a key written
    twice, the later one: the one in effect)."""
    lines: dict[str, int] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            # Of a key written twice only the later one is in effect, subtree and all.
            last = {str(key.value): (key, value) for key, value in node.value}
            for key_node, value_node in last.values():
                name = f"{path}.{key_node.value}" if path else str(key_node.value)
                lines[name] = key_node.start_mark.line + 1
                walk(value_node, name)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                lines[f"{path}[{index}]"] = item.start_mark.line + 1
                walk(item, f"{path}[{index}]")

    walk(yaml.compose(text, Loader=yaml.SafeLoader), "")
    return lines


def at_line(problem: str, lines: Mapping[str, int]) -> str:
    """``line 3: excluded_paths[1]: ...`` for a problem the reader phrased as
    ``excluded_paths[1]: ...``."""
    match = _KEY_PATH.match(problem)
    if match is None:
        return problem
    path = match.group(1)
    while path and path not in lines:  # the nearest enclosing key the document has
        if path.endswith("]"):
            path = path[:path.rindex("[")]
        elif "." in path:
            path = path.rpartition(".")[0]
        else:
            return problem
    return f"line {lines[path]}: {problem}" if path else problem
