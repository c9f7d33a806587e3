"""Check a simulator response against GitHub's own REST description.

``github-rest-subset.json`` (made by ``extract``) holds, for every route the simulator
serves, the JSON responses GitHub documents and the schemas they use. ``problems``
returns what is wrong with one response: a field GitHub always sends that is missing, a
value of the wrong type, a status GitHub never answers that route with. The
description is OpenAPI 3.0; its ``nullable`` is turned into JSON Schema's ``null`` type,
and the rest is checked as Draft 4.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator

SUBSET = Path(__file__).with_name("github-rest-subset.json")
#: Where GitHub's description contradicts GitHub, the description is corrected here, and
#: each correction says why. (operation, status, path to the schema): (keyword, becomes)
ERRATA: dict[tuple[str, str, tuple[str, ...]], tuple[str, str, str]] = {
    ("GET /app/installations", "200", ("items", "properties", "account")): (
        "allOf", "anyOf",
        "the list's inline copy of Installation says the account is a Simple User *and* an "
        "Enterprise; GitHub sends one of them, as the Installation schema itself says"),
}


#: Statuses GitHub answers a route with that its description leaves out, and why they are
#: known to happen. Their bodies are GitHub's usual error shape, checked as such.
UNDOCUMENTED: dict[tuple[str, str], str] = {
    ("POST /repos/{owner}/{repo}/check-runs", "422"):
        "the description lists only 201, yet a head_sha the repository lacks is answered "
        '422 "No commit found for SHA: …", and a completed status without a conclusion, an '
        "unknown status or conclusion, or an output without its summary are 422 "
        "Validation Failed, as the Checks guide and its users report",
    ("PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}", "422"):
        "the same validations as the create, on the fields an update gives",
}


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 to JSON Schema: ``nullable: true`` becomes a ``null`` alternative."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _json_schema(value) for key, value in node.items()
           if key not in ("nullable", "example", "examples", "discriminator")}
    if node.get("nullable") is True:
        return {"anyOf": [out, {"type": "null"}]}
    return out


@cache
def _description() -> dict[str, dict[str, Any]]:
    data = json.loads(SUBSET.read_text())
    components = {"schemas": {ref.rsplit("/", 1)[-1]: _json_schema(schema)
                              for ref, schema in data["schemas"].items()}}
    # Each response schema becomes a document of its own holding the components, so its
    # "#/components/schemas/…" references resolve (Draft 4 ignores a $ref's siblings).
    for (op, status, path), (old, new, _why) in ERRATA.items():
        node = data["operations"][op][status]
        for key in path:
            node = node[key]
        node[new] = node.pop(old)
    return {op: {status: None if schema is None else
                 Draft4Validator({**_json_schema(schema), "components": components})
                 for status, schema in responses.items()}
            for op, responses in data["operations"].items()}


def source() -> str:
    return str(json.loads(SUBSET.read_text())["source"])


def operations() -> set[str]:
    """``"METHOD /template"`` for every operation the subset describes."""
    return set(_description())


def problems(method: str, template: str, status: int, body: Any) -> list[str]:
    """What is wrong with this response, as GitHub describes the route (empty: nothing)."""
    described = _description()
    op = f"{method} {template}"
    if op not in described:
        return [f"{op}: not in GitHub's description"]
    responses = described[op]
    if str(status) not in responses:
        if status in (304, 401, 403, 404, 429, 500, 502, 503):
            return []  # answered by every route (rate limits, auth, outages)
        if (op, str(status)) in UNDOCUMENTED:
            return _error_shape(op, status, body)
        return [f"{op}: GitHub documents no {status} answer (only {sorted(responses)})"]
    validator = responses[str(status)]
    if validator is None:
        return [] if body in (None, b"", "") else [f"{op} {status}: GitHub sends no body"]
    found = []
    for error in _leaves(validator.iter_errors(body)):
        where = "/".join(str(p) for p in error.absolute_path) or "(body)"
        found.append(f"{op} {status} at {where}: {error.message[:200]}")
    return sorted(set(found))


def _error_shape(op: str, status: int, body: Any) -> list[str]:
    """GitHub's error body: a ``message`` string, a ``documentation_url``, maybe ``errors``."""
    if not isinstance(body, dict) or not isinstance(body.get("message"), str) \
            or not isinstance(body.get("documentation_url"), str):
        return [f"{op} {status}: not GitHub's error shape"]
    return []


def _leaves(errors: Any) -> Any:
    """The errors that say what is wrong. Inside an ``anyOf``/``oneOf`` (OpenAPI's
    nullable, or "a user or an enterprise"), the alternative that came closest."""
    for error in errors:
        if not error.context:
            yield error
            continue
        branches: dict[Any, list[Any]] = {}
        for inner in error.context:
            if inner.validator == "type" and inner.validator_value == "null":
                continue
            branches.setdefault(inner.relative_schema_path[0], []).append(inner)
        if not branches:
            yield error
            continue
        closest = min(branches.values(), key=lambda found: len(list(_leaves(found))))
        yield from _leaves(closest)
