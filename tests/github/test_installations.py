"""Who the App is installed on: a repository's installation found as the App (JWT), every
installation and every repository an installation can see, page by page."""

from __future__ import annotations

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from service.github.errors import NotFound
from service.github.installations import (
    find_repository_installation,
    list_installation_repositories,
    list_installations,
)
from tests.github.app_kit import (
    FakeGitHub,
    app_client,
    pem,
    rsa_key,
)
from tests.github.client_kit import BASE, FakeClock

__all__ = ["pem", "rsa_key"]  # fixtures


@pytest.mark.anyio
async def test_find_repository_installation_uses_the_jwt(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def installation(request: httpx.Request) -> httpx.Response:
        assert github.jwt_ok(request)
        return httpx.Response(200, json={"id": 1234, "account": {"login": "o"}})

    github.routes[("GET", "/repos/octo/hello-world/installation")] = installation
    async with app_client(github, pem, clock) as client:
        assert await find_repository_installation(client, "octo", "hello-world") == 1234
        with pytest.raises(NotFound):
            await find_repository_installation(client, "octo", "not-installed")
        with pytest.raises(ValueError):
            await find_repository_installation(client, "octo", "../../app")
    assert not any(r.url.path.endswith("/access_tokens") for r in github.requests)


@pytest.mark.anyio
async def test_list_installations_follows_pages(rsa_key: rsa.RSAPrivateKey, pem: str) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def installations(request: httpx.Request) -> httpx.Response:
        assert github.jwt_ok(request)
        page = int(request.url.params.get("page", "1"))
        items = [
            {"id": page * 10 + i, "account": {"login": f"org{page}{i}", "type": "Organization"},
             "repository_selection": "all", "suspended_at": None if i else "2026-01-01T00:00:00Z"}
            for i in range(2)
        ]
        headers = {}
        if page < 3:
            headers["link"] = (
                f'<https://api.github.com/app/installations?per_page=100&page={page + 1}>; '
                'rel="next", <https://api.github.com/app/installations?page=3>; rel="last"'
            )
        return httpx.Response(200, json=items, headers=headers)

    github.routes[("GET", "/app/installations")] = installations
    async with app_client(github, pem, clock) as client:
        found = [i async for i in list_installations(client)]
    assert [i.id for i in found] == [10, 11, 20, 21, 30, 31]
    assert found[0].suspended
    assert not found[1].suspended
    assert found[1].account == "org11"
    assert found[1].account_type == "Organization"
    assert github.requests[0].url.params["per_page"] == "100"


@pytest.mark.anyio
async def test_list_installation_repositories_uses_the_installation_token(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def repositories(request: httpx.Request) -> httpx.Response:
        assert github.token_ok(request)
        page = int(request.url.params.get("page", "1"))
        repos = [{"id": page, "full_name": f"o/r{page}", "private": True}]
        headers = {}
        if page == 1:
            headers["link"] = f'<{BASE}/installation/repositories?page=2>; rel="next"'
        return httpx.Response(200, json={"total_count": 2, "repositories": repos}, headers=headers)

    github.routes[("GET", "/installation/repositories")] = repositories
    async with app_client(github, pem, clock) as client:
        repos = [r async for r in list_installation_repositories(client, 77)]
    assert [(r.owner, r.name, r.private) for r in repos] == [("o", "r1", True), ("o", "r2", True)]
    assert github.requests[0].url.path == "/app/installations/77/access_tokens"
