"""A tiny router: route templates, the per-request context handlers get, and their reply.

Each route declares how it authenticates (``jwt`` for App endpoints, ``token`` for
installation endpoints, ``none``) and whether it creates content (which the secondary
rate limit counts). Handlers raise ``ApiError`` for GitHub error answers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from .models import PERMISSION_LEVELS, App, Repository, Token
from .payloads import Renderer
from .rest import ApiError, not_found, paginate

if TYPE_CHECKING:
    from .state import World

AuthKind = Literal["jwt", "token", "none"]
NOT_ACCESSIBLE = "Resource not accessible by integration"


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # JSON-able; ignored when `text` is set
    text: str | None = None
    content_type: str = "application/json; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    last_modified: datetime | None = None


@dataclass
class Ctx:
    world: World
    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    base_url: str
    app: App | None = None
    token: Token | None = None

    @property
    def render(self) -> Renderer:
        return Renderer(self.world, api=self.base_url, web=self.world.web_url)

    def json(self) -> dict[str, Any]:
        if not self.body.strip():
            return {}
        try:
            value = json.loads(self.body)
        except ValueError as exc:
            raise ApiError(400, "Problems parsing JSON") from exc
        if not isinstance(value, dict):
            raise ApiError(400, "Problems parsing JSON")
        return value

    def int_param(self, name: str) -> int:
        try:
            return int(self.params[name])
        except ValueError as exc:
            raise not_found() from exc

    def repository(self, *permissions: tuple[str, str]) -> Repository:
        """The path's repository, checked against the token: 404 when the token cannot see
        it, 403 with ``X-Accepted-GitHub-Permissions`` when no listed permission is held."""
        repo = self.world.find_repo(self.params["owner"], self.params["repo"])
        token = self.token
        if repo is None or token is None:
            raise not_found()
        inst = self.world.installations.get(token.installation_id)
        if inst is None or not self.world.installation_has(inst, repo):
            raise not_found()
        if token.repository_ids is not None and repo.id not in token.repository_ids:
            raise not_found()
        if permissions and not any(self.has(name, level) for name, level in permissions):
            accepted = ", ".join(f"{name}={level}" for name, level in permissions)
            raise ApiError(403, NOT_ACCESSIBLE,
                           headers={"x-accepted-github-permissions": accepted})
        return repo

    def has(self, name: str, level: str) -> bool:
        if self.token is None:
            return False
        held = self.token.permissions.get(name)
        return held is not None and PERMISSION_LEVELS[held] >= PERMISSION_LEVELS[level]

    def page(self, items: list[Any], *, default: int = 30, maximum: int = 100) -> Reply:
        chunk, link = paginate(items, url=f"{self.base_url}{self.path}", query=self.query,
                               default=default, maximum=maximum)
        return Reply(body=chunk, headers={"link": link} if link else {})

    @property
    def accept(self) -> str:
        return self.headers.get("accept", "")


Handler = Callable[[Ctx], Awaitable[Reply]]


@dataclass(frozen=True)
class Route:
    method: str
    template: str
    handler: Handler
    auth: AuthKind
    creates_content: bool
    rate_limited: bool
    pattern: re.Pattern[str]
    resource: str = "core"  # the rate-limit bucket it counts against ("search")


class RouteTable:
    def __init__(self) -> None:
        self.routes: list[Route] = []

    def add(self, method: str, template: str, *, auth: AuthKind,
            creates_content: bool = False, rate_limited: bool = True,
            resource: str = "core") -> Callable[[Handler], Handler]:
        # ``{name}`` is one path segment; ``{name+}`` the rest of the path (a file's path).
        regex = re.sub(r"\{(\w+)\+\}", r"(?P<\1>.+)", template)
        regex = re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", regex)

        def register(handler: Handler) -> Handler:
            self.routes.append(Route(method, template, handler, auth, creates_content,
                                     rate_limited, re.compile(f"^{regex}$"), resource))
            return handler

        return register

    def extend(self, other: RouteTable) -> None:
        self.routes.extend(other.routes)

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """The matching route with the fewest parameters, so ``/pulls/comments`` beats
        ``/pulls/{number}`` whatever the registration order."""
        best: tuple[Route, dict[str, str]] | None = None
        for route in self.routes:
            if route.method != method:
                continue
            found = route.pattern.match(path)
            if found and (best is None or len(found.groupdict()) < len(best[1])):
                best = (route, found.groupdict())
        return best
