"""The App's own REST calls (``/app/...``, ``/installation/...``) and the shapes they return.

Typed against ``AppCalls``, the three client methods they use, so that the client can
mint its installation tokens through this module without the two importing each other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from service.github.actors import APP, Actor
from service.github.auth import InstallationToken, parse_token_response
from service.github.errors import GitHubError
from service.github.urls import repo_path

__all__ = ["AppCalls", "Installation", "Repository", "find_repository_installation",
           "list_installation_repositories", "list_installations", "mint_installation_token",
           "parse_installation", "parse_repository"]


class AppCalls(Protocol):
    """What these calls need of ``GitHubClient``."""

    async def get_json(self, actor: Actor, path: str,
                       params: Mapping[str, str | int | bool] | None = None) -> Any: ...

    async def post_json(self, actor: Actor, path: str, json: Any = None, *,
                        idempotent: bool = False) -> Any: ...

    def paginate(self, actor: Actor, path: str,
                 params: Mapping[str, str | int | bool] | None = None,
                 *, items_key: str | None = None, max_pages: int | None = None
                 ) -> AsyncIterator[Any]: ...


async def mint_installation_token(client: AppCalls, installation_id: int) -> InstallationToken:
    """``POST /app/installations/{id}/access_tokens`` as the App, parsed and checked."""
    data = await client.post_json(
        APP, f"/app/installations/{int(installation_id)}/access_tokens", idempotent=True
    )
    return parse_token_response(installation_id, data)


@dataclass(frozen=True)
class Installation:
    """An installation of the App on an account (from ``GET /app/installations``)."""

    id: int
    account: str
    account_type: str
    repository_selection: str
    suspended: bool


@dataclass(frozen=True)
class Repository:
    """A repository an installation can access (from ``GET /installation/repositories``)."""

    id: int
    full_name: str
    private: bool
    archived: bool

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]


def _field(data: Mapping[str, Any], key: str, kind: type[Any], what: str) -> Any:
    value = data.get(key)
    # bool is an int in Python; an id of ``true`` is a malformed response, not id 1.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise GitHubError(f"{what}: field {key!r} missing or of the wrong type")
    return value


def parse_installation(data: object) -> Installation:
    if not isinstance(data, Mapping):
        raise GitHubError("installation entry is not a JSON object")
    account = data.get("account")
    account_map: Mapping[str, Any] = account if isinstance(account, Mapping) else {}
    return Installation(
        id=_field(data, "id", int, "installation"),
        account=str(account_map.get("login", "")),
        account_type=str(account_map.get("type", data.get("target_type", ""))),
        repository_selection=str(data.get("repository_selection", "")),
        suspended=data.get("suspended_at") is not None,
    )


def parse_repository(data: object) -> Repository:
    if not isinstance(data, Mapping):
        raise GitHubError("repository entry is not a JSON object")
    full_name = _field(data, "full_name", str, "repository")
    if full_name.count("/") != 1:
        raise GitHubError("repository: full_name is not owner/name")
    return Repository(
        id=_field(data, "id", int, "repository"),
        full_name=full_name,
        private=bool(data.get("private", False)),
        archived=bool(data.get("archived", False)),
    )


async def find_repository_installation(client: AppCalls, owner: str, repo: str) -> int:
    """The installation id of the App on ``owner/repo`` (``NotFound`` when not installed)."""
    data = await client.get_json(APP, f"{repo_path(owner, repo)}/installation")
    if not isinstance(data, Mapping):
        raise GitHubError("repository installation response is not a JSON object")
    installation_id: int = _field(data, "id", int, "repository installation")
    return installation_id


async def list_installations(client: AppCalls) -> AsyncIterator[Installation]:
    """Every installation of the App (``GET /app/installations``, all pages)."""
    async for item in client.paginate(APP, "/app/installations"):
        yield parse_installation(item)


async def list_installation_repositories(
    client: AppCalls, installation_id: int
) -> AsyncIterator[Repository]:
    """Every repository one installation can access (installation token, all pages)."""
    async for item in client.paginate(
        installation_id, "/installation/repositories", items_key="repositories"
    ):
        yield parse_repository(item)
