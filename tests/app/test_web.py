"""The HTTP app's routes and the admin gate in front of ``/status``, ``/metrics`` and
``/budget``: closed without a token (403 when none is configured), the bearer token for
the JSON routes, and no route beside the ones the service serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.webhook_env import open_env

ADMIN = ("/metrics", "/budget")


@pytest.mark.anyio
async def test_without_a_configured_token_the_admin_routes_answer_403(tmp_path: Path) -> None:
    async with open_env(tmp_path, server={"admin": "token"}) as env:
        for path in (*ADMIN, "/status"):
            response = await env.client.get(path, headers={"Authorization": "Bearer x"})
            assert response.status_code == 403, path
            assert "no admin token is configured" in response.text
        assert (await env.client.get("/healthz")).status_code == 200  # never gated


@pytest.mark.anyio
async def test_the_json_routes_take_the_bearer_token_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "admin").write_text("s3cret-admin\n")
    async with open_env(tmp_path, server={"admin_token_file": "admin"}) as env:
        for path in ADMIN:
            refused = await env.client.get(path)
            assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
            assert refused.headers["cache-control"] == "no-store"
            wrong = await env.client.get(path, headers={"Authorization": "Bearer s3cret"})
            assert wrong.status_code == 401
            right = await env.client.get(path, headers={"Authorization": "bearer s3cret-admin"})
            assert right.status_code == 200, path


@pytest.mark.anyio
async def test_open_admin_routes_answer_anyone(tmp_path: Path) -> None:
    async with open_env(tmp_path, server={"admin": "open"}) as env:
        for path in (*ADMIN, "/status"):
            assert (await env.client.get(path)).status_code == 200, path


@pytest.mark.anyio
async def test_no_route_beside_the_services_and_no_redirect_for_a_slash(tmp_path: Path) -> None:
    async with open_env(tmp_path, server={"admin": "open"}) as env:
        for path in ("/docs", "/redoc", "/openapi.json", "/healthz/", "/budget/"):
            response = await env.client.get(path)
            assert response.status_code == 404, path
            assert "location" not in response.headers
        assert (await env.client.get(env.config.server.webhook_path)).status_code == 405
