"""The JSON Schema of ``.github/pr-review-agent.yml``, for editors, from ``keys.KEYS``.

``python -m service.config.repository.json_schema`` prints it; docs/pr-review-agent.schema.json
is that output (a test fails when they differ). An editor with a YAML language server
picks it up from a first line ``# yaml-language-server: $schema=<its URL>``. The schema
says what the parser says, as far as a schema can: the parser stays the judge (a path
inside the repository, one line of language).
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final

from service.config.repository.keys import KEYS, MAX_INSTRUCTIONS, RepoKey
from service.model.severity import SEVERITIES

__all__ = ["schema", "text"]

_KINDS: Final[dict[str, dict[str, Any]]] = {
    "bool": {"type": "boolean"},
    "globs": {"type": "array", "items": {"type": "string", "minLength": 1},
              "uniqueItems": True},
    "path": {"type": "string", "minLength": 1, "pattern": "^[^/]"},
    "text": {"type": "string", "minLength": 1, "maxLength": MAX_INSTRUCTIONS},
    "severity": {"enum": list(SEVERITIES)},
    "count": {"type": "integer", "minimum": 1, "maximum": 100},
    "line": {"type": "string", "pattern": "^[\\w][\\w \\-]{0,39}$"},
}


def _property(key: RepoKey) -> dict[str, Any]:
    shape = dict(_KINDS[key.kind])
    if key.name == "checks.fail_on":  # null: never fail
        shape = {"enum": [*SEVERITIES, None]}
    return {"description": f"{key.doc} Default: {key.default}.".replace("`", ""), **shape,
            "examples": [key.example]}


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
