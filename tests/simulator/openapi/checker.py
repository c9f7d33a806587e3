"""Every JSON answer the simulator serves, checked against GitHub's REST description.

``SimulatorApp`` hands each non-fault JSON response to ``check``; what GitHub's
description rejects is appended to ``PROBLEMS``, and the suite's autouse fixture
(``tests/conftest.py``) fails the test during which it was served. Each distinct shape
(the route, the status and the body's structure) is validated once per session, so the
whole suite pays for a few hundred validations, not thousands.
"""

from __future__ import annotations

import json
from typing import Any

from tests.simulator.openapi.validate import problems

PROBLEMS: list[str] = []
_seen: set[tuple[str, str, int, frozenset[tuple[str, str]]]] = set()


def _signature(node: Any, path: str = "", out: set[tuple[str, str]] | None = None
               ) -> frozenset[tuple[str, str]]:
    """The body's structure: every key path (list items as ``*``) with its JSON type."""
    found: set[tuple[str, str]] = set() if out is None else out
    found.add((path, type(node).__name__))
    if isinstance(node, dict):
        for key, value in node.items():
            _signature(value, f"{path}/{key}", found)
    elif isinstance(node, list):
        for value in node:
            _signature(value, f"{path}/*", found)
    return frozenset(found)


GRAPHQL = "/graphql"


def check(method: str, template: str, status: int, body: bytes | None) -> None:
    """Validate one response (once per distinct shape); problems go to ``PROBLEMS``.
    GraphQL is not in the REST description: its answers come from an executor on GitHub's
    schema (``tests/simulator/graphql_api.py``)."""
    if template == GRAPHQL:
        return
    try:
        value = json.loads(body) if body else None
    except ValueError:
        PROBLEMS.append(f"{method} {template} {status}: the body is not JSON")
        return
    key = (method, template, status, _signature(value))
    if key in _seen:
        return
    _seen.add(key)
    PROBLEMS.extend(problems(method, template, status, value))
