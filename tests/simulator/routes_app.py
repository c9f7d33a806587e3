"""App and installation endpoints, installation tokens, rate_limit, the manifest flow."""

from __future__ import annotations

from typing import Any

from .clock import iso
from .models import PERMISSION_LEVELS, Installation
from .rest import ApiError, not_found
from .routing import Ctx, Reply, RouteTable

routes = RouteTable()

REPOS_NOT_ACCESSIBLE = (
    "There is at least one repository that does not exist or is not accessible to the parent "
    "installation."
)
PERMISSIONS_NOT_GRANTED = "The permissions requested are not granted to this installation."
# GitHub answers a token request it cannot grant with the message alone, no errors list.
TOKEN_DOCS = ("https://docs.github.com/rest/apps/apps"
              "#create-an-installation-access-token-for-an-app")


def _own_installation(ctx: Ctx) -> Installation:
    inst = ctx.world.installations.get(ctx.int_param("installation_id"))
    if inst is None or ctx.app is None or inst.app_id != ctx.app.id:
        raise not_found()
    return inst


@routes.add("GET", "/app", auth="jwt")
async def get_app(ctx: Ctx) -> Reply:
    assert ctx.app is not None
    body = ctx.render.app(ctx.app)
    body["installations_count"] = sum(
        1 for i in ctx.world.installations.values() if i.app_id == ctx.app.id)
    return Reply(body=body)


@routes.add("GET", "/app/installations", auth="jwt")
async def list_installations(ctx: Ctx) -> Reply:
    assert ctx.app is not None
    app_id = ctx.app.id
    items = [ctx.render.installation(i) for i in sorted(
        ctx.world.installations.values(), key=lambda i: i.id) if i.app_id == app_id]
    return ctx.page(items)


@routes.add("GET", "/app/installations/{installation_id}", auth="jwt")
async def get_installation(ctx: Ctx) -> Reply:
    return Reply(body=ctx.render.installation(_own_installation(ctx)))


@routes.add("POST", "/app/installations/{installation_id}/access_tokens", auth="jwt")
async def create_access_token(ctx: Ctx) -> Reply:
    inst = _own_installation(ctx)
    if inst.suspended_at is not None:
        raise ApiError(403, "This installation has been suspended")
    body = ctx.json()
    available = ctx.world.installation_repos(inst)
    repository_ids: set[int] | None = None
    names, ids = body.get("repositories"), body.get("repository_ids")
    if names is not None or ids is not None:
        by_name = {r.name: r for r in available}
        by_id = {r.id: r for r in available}
        chosen = set()
        for name in names or []:
            if not isinstance(name, str) or name not in by_name:
                raise ApiError(422, REPOS_NOT_ACCESSIBLE, documentation_url=TOKEN_DOCS)
            chosen.add(by_name[name].id)
        for repo_id in ids or []:
            if repo_id not in by_id:
                raise ApiError(422, REPOS_NOT_ACCESSIBLE, documentation_url=TOKEN_DOCS)
            chosen.add(repo_id)
        if len(chosen) > 500:
            raise ApiError(422, "Too many repositories requested (the maximum is 500)",
                           documentation_url=TOKEN_DOCS)
        repository_ids = chosen
    permissions = body.get("permissions")
    if permissions is not None:
        if not isinstance(permissions, dict):
            raise ApiError(422, PERMISSIONS_NOT_GRANTED, documentation_url=TOKEN_DOCS)
        for name, level in permissions.items():
            held = inst.permissions.get(name)
            if held is None or level not in PERMISSION_LEVELS or (
                    PERMISSION_LEVELS[level] > PERMISSION_LEVELS[held]):
                raise ApiError(422, PERMISSIONS_NOT_GRANTED, documentation_url=TOKEN_DOCS)
    override = ctx.headers.get("x-github-stateless-s2s-token", "").lower()
    stateless = {"enabled": True, "disabled": False}.get(override)
    token = ctx.world.mint_token(inst, permissions=permissions, repository_ids=repository_ids,
                                 stateless=stateless)
    out: dict[str, Any] = {
        "token": token.value,
        "expires_at": iso(token.expires_at),
        "permissions": dict(token.permissions),
        "repository_selection": "selected" if repository_ids is not None
        else inst.repository_selection,
    }
    if repository_ids is not None:
        out["repositories"] = [ctx.render.repo(ctx.world.repos[i]) for i in sorted(repository_ids)]
    return Reply(status=201, body=out)


@routes.add("GET", "/repos/{owner}/{repo}/installation", auth="jwt")
async def get_repo_installation(ctx: Ctx) -> Reply:
    repo = ctx.world.find_repo(ctx.params["owner"], ctx.params["repo"])
    inst = ctx.world.installation_for(repo, ctx.app.id if ctx.app else None) if repo else None
    if inst is None:
        raise not_found()
    return Reply(body=ctx.render.installation(inst))


@routes.add("GET", "/installation/repositories", auth="token")
async def list_installation_repositories(ctx: Ctx) -> Reply:
    assert ctx.token is not None
    inst = ctx.world.installations[ctx.token.installation_id]
    repos = ctx.world.installation_repos(inst)
    if ctx.token.repository_ids is not None:
        repos = [r for r in repos if r.id in ctx.token.repository_ids]
    reply = ctx.page(sorted(repos, key=lambda r: r.id))  # render the page only
    reply.body = {"total_count": len(repos), "repository_selection": inst.repository_selection,
                  "repositories": [ctx.render.repo(r) for r in reply.body]}
    return reply


@routes.add("DELETE", "/installation/token", auth="token")
async def revoke_token(ctx: Ctx) -> Reply:
    assert ctx.token is not None
    ctx.token.revoked = True
    return Reply(status=204)


@routes.add("GET", "/rate_limit", auth="token", rate_limited=False)
async def rate_limit(ctx: Ctx) -> Reply:
    assert ctx.token is not None
    bucket = ctx.world.limiter.bucket(f"installation:{ctx.token.installation_id}",
                                      ctx.world.clock.timestamp())
    core = {"limit": bucket.limit, "used": bucket.used, "remaining": bucket.remaining,
            "reset": bucket.reset_at, "resource": "core"}
    return Reply(body={"resources": {"core": core}, "rate": core})


@routes.add("POST", "/app-manifests/{code}/conversions", auth="none")
async def convert_manifest(ctx: Ctx) -> Reply:
    converted = ctx.world.convert_manifest(ctx.params["code"])
    if converted is None:
        raise not_found()
    app, pem = converted
    body = ctx.render.app(app)
    body.update({"installations_count": 0, "client_secret": app.client_secret,
                 "webhook_secret": app.webhook_secret, "pem": pem})
    return Reply(status=201, body=body)
