"""The simulator's answers have GitHub's shapes: checked against GitHub's own REST
description (``tests/simulator/openapi``) for every response it serves, in every test
(the autouse fixture in ``tests/conftest.py``). These pin the checker itself."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.simulator.app import build_routes
from tests.simulator.harness import Harness, bearer
from tests.simulator.openapi import validate
from tests.simulator.openapi.validate import ERRATA, SUBSET, problems
from tests.simulator.payloads import Renderer


def test_the_description_covers_every_route_the_simulator_serves() -> None:
    # GraphQL is not in the REST description: its answers come from an executor on
    # GitHub's schema (tests/simulator/graphql_api.py).
    served = {f"{r.method} {r.template}" for r in build_routes().routes} - {"POST /graphql"}
    assert served == validate.operations()
    assert "@octokit/openapi" in validate.source()


@pytest.fixture
async def app_json() -> dict[str, Any]:
    harness = Harness.create()
    async with harness.client:
        response = await harness.client.get("/app", headers=bearer(harness.jwt()))
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.anyio
async def test_a_served_shape_passes_and_a_broken_one_is_caught(app_json: dict[str, Any]) -> None:
    assert problems("GET", "/app", 200, app_json) == []
    broken = copy.deepcopy(app_json)
    del broken["owner"]["events_url"]
    broken["id"] = "4242"
    found = problems("GET", "/app", 200, broken)
    assert any("'events_url' is a required property" in p for p in found)
    assert any("at id: '4242' is not of type 'integer'" in p for p in found)
    assert problems("GET", "/app", 418, {}) == [
        "GET /app: GitHub documents no 418 answer (only ['200'])"]


def test_a_bot_users_urls_escape_its_brackets_as_github_does() -> None:
    harness = Harness.create()
    render = Renderer(harness.world, api=harness.world.api_url, web=harness.world.web_url)
    user = render.user(harness.world.user("pr-reviewer[bot]"))
    assert user["url"].endswith("/users/pr-reviewer%5Bbot%5D")
    assert user["events_url"].endswith("/users/pr-reviewer%5Bbot%5D/events{/privacy}")
    assert user["login"] == "pr-reviewer[bot]"


def test_each_erratum_is_still_needed() -> None:
    # With the description as GitHub publishes it, a shape GitHub really sends fails.
    data = json.loads(SUBSET.read_text())
    for (op, status, path), (old, _new, why) in ERRATA.items():
        node = data["operations"][op][status]
        for key in path:
            node = node[key]
        assert old in node, f"{op}: the description no longer has {old}; drop the erratum"
        assert why
