"""The JSON Schema of ``.github/pr-review-agent.yml``, for editors, from its declarations.

``python -m service.config.repository.json_schema`` prints it; docs/pr-review-agent.schema.json
is that output (a test fails when they differ). An editor with a YAML language server
picks it up from a first line ``# yaml-language-server: $schema=<its URL>``. The schema
says what the parser says, as far as a schema can: the parser stays the judge (a path
inside the repository, one line of language).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from service.config.declare import Key, keys_of
from service.config.repository.keys import KEYS

__all__ = ["schema", "text"]

def _shape(key: Key) -> dict[str, Any]:
    """What JSON Schema can say of a declared key: its kind and bounds."""
    if key.kind == "bool":
        return {"type": "boolean"}
    if key.kind == "int":
        return {"type": "integer", "minimum": key.minimum,
                **({"maximum": key.maximum} if key.maximum is not None else {})}
    if key.kind == "strs":
        return {"type": "array", "items": {"type": "string", "minLength": 1},
                "uniqueItems": True}
    if key.kind in ("str", "str?") and key.allowed:
        return {"enum": [*key.allowed, *([None] if key.kind == "str?" else [])]}
    if key.kind == "str":
        shape: dict[str, Any] = {"type": "string", "minLength": 1}
        if key.maximum is not None:
            shape["maxLength"] = key.maximum
        if key.pattern is not None:
            shape["pattern"] = f"^(?:{key.pattern.pattern})$"
        return shape
    if key.kind == "items" and key.item is not None:
        fields = [k for _, (k,) in keys_of(key.item)]
        return {"type": "array", "maxItems": key.maximum, "items": {
            "type": "object", "additionalProperties": False,
            "required": [k.name for k in fields if k.required],
            "properties": {k.name: {"description": k.doc.replace("`", ""), **_shape(k)}
                           for k in fields}}}
    raise ValueError(f"no JSON Schema for kind {key.kind!r}")  # pragma: no cover


def _property(key: Key) -> dict[str, Any]:
    return {"description": f"{key.doc} Default: {key.inherits}.".replace("`", ""),
            **_shape(key), "examples": [key.example]}


def schema() -> dict[str, Any]:
    """The schema as a JSON-able mapping."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key in KEYS:
        if "." in key.name:
            parent, child = key.name.split(".", 1)
            nested.setdefault(parent, {})[child] = _property(key)
        else:
            top[key.name] = _property(key)
    for parent, children in nested.items():
        top[parent] = {"type": "object", "additionalProperties": False,
                       "properties": children}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "pr-review-agent repository config (.github/pr-review-agent.yml)",
        "description": "How this repository's pull requests are reviewed. Every key is "
                       "optional; the operator's config decides which keys a repository "
                       "may set. See docs/REPOSITORY-CONFIG.md.",
        "type": ["object", "null"],
        "additionalProperties": False,
        "properties": top,
    }


def text() -> str:
    """The schema as the published file holds it."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(text())
