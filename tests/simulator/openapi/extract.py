"""Cut GitHub's REST description down to the operations the simulator serves.

Run by hand when the simulator gains a route or GitHub's description moves::

    npm pack @octokit/openapi@VERSION && tar xzf octokit-openapi-VERSION.tgz
    python -m tests.simulator.openapi.extract package/generated/api.github.com.json

It writes ``github-rest-subset.json`` beside this file: for every route in the
simulator's table, each JSON response GitHub documents for it (success and error
statuses), with every schema those reference, and nothing else. The test suite reads
that file (``tests.simulator.openapi.validate``); nothing here runs in the tests.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("github-rest-subset.json")


def simulator_routes() -> list[tuple[str, str]]:
    from tests.simulator.app import build_routes

    # /graphql is not REST: its answers are checked against GitHub's GraphQL schema.
    return sorted({(r.method, r.template) for r in build_routes().routes
                   if r.template != "/graphql"})


def spec_path(template: str, paths: dict[str, Any]) -> str:
    """The description's path for a simulator template (parameter names differ)."""
    shape = re.sub(r"\{\w+\+?\}", "{}", template)
    for path in paths:
        if re.sub(r"\{\w+\}", "{}", path) == shape:
            return path
    raise KeyError(f"GitHub's description has no path like {template}")


def refs(node: Any, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            refs(value, found)
    elif isinstance(node, list):
        for value in node:
            refs(value, found)


def resolve(spec: dict[str, Any], ref: str) -> Any:
    node: Any = spec
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    operations: dict[str, dict[str, Any]] = {}
    wanted: set[str] = set()
    for method, template in simulator_routes():
        path = spec_path(template, spec["paths"])
        op = spec["paths"][path][method.lower()]
        responses = {}
        for status, answer in op["responses"].items():
            response = resolve(spec, answer["$ref"]) if "$ref" in answer else answer
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            responses[status] = schema  # None: GitHub documents no JSON body
            refs(schema, wanted)
        operations[f"{method} {template}"] = responses
    components: dict[str, Any] = {}
    todo = sorted(wanted)
    while todo:
        ref = todo.pop()
        if ref in components:
            continue
        node = resolve(spec, ref)
        components[ref] = node
        more: set[str] = set()
        refs(node, more)
        todo.extend(sorted(more - components.keys()))
    OUT.write_text(json.dumps({
        "source": f"@octokit/openapi {spec['info']['version']}, api.github.com.json "
                  f"(OpenAPI {spec['openapi']}), GitHub's REST API description (MIT)",
        "operations": operations,
        "schemas": dict(sorted(components.items())),
    }, indent=1, sort_keys=False) + "\n")
    print(f"{OUT}: {len(operations)} operations, {len(components)} schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
