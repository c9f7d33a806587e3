"""GitHub's web side, as far as an App's owner meets it: registering an App from a manifest,
and installing it on repositories. Served at the simulator's own root, which is its web URL
as well as its API URL (``service.github.urls.web_url_for``).

- ``POST /settings/apps/new?state=S`` (or ``/organizations/{org}/settings/apps/new``) with
  the form field ``manifest``: what the registration page's self-submitting form sends.
  GitHub shows a confirmation page with a *Create GitHub App* button; the simulator acts as
  if it were clicked and redirects (302) to the manifest's ``redirect_url`` with ``code``
  and ``state``, so a browser lands back on the service and registration completes.
- ``GET /apps/{slug}/installations/new``: a page listing the repositories the App can be
  installed on, with an *Install* button; ``POST`` to it (``account``, one ``repositories``
  field per repository) installs the App, emits the ``installation`` webhook and says so.

The control API's ``POST /_simulator/installations`` does the same install for scripts.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode

from starlette.responses import HTMLResponse, RedirectResponse, Response

if TYPE_CHECKING:
    from .models import Installation
    from .state import World

__all__ = ["handle", "install", "is_web_page"]

_REGISTER = re.compile(r"^(?:/organizations/([^/]+))?/settings/apps/new$")
_INSTALL = re.compile(r"^/apps/([^/]+)/installations/new$")


def is_web_page(path: str) -> bool:
    return bool(_REGISTER.match(path) or _INSTALL.match(path))


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><title>{escape(title)}</title><h1>{escape(title)}"
                        f"</h1>{body}", status_code=status)


def install(world: World, *, app_id: int, account: str,
            repositories: list[str] | None) -> Installation:
    """Install App ``app_id`` on ``account``'s ``repositories`` (None: all of them) and emit
    the ``installation`` ``created`` webhook GitHub sends the App."""
    inst = world.add_installation(account=account, repositories=repositories, app_id=app_id)
    world.emit("installation", world.payloads.installation("created", inst))
    return inst


async def handle(world: World, method: str, path: str, query: str, body: bytes) -> Response:
    """Answer one web-page request (``is_web_page(path)``)."""
    form = parse_qs(body.decode("utf-8", "replace"))
    params = parse_qs(query)
    registering = _REGISTER.match(path)
    if registering is not None:
        if method != "POST":
            return _page("Method not allowed", "<p>Register from the service's page.</p>", 405)
        return _register(world, registering.group(1), form, params)
    installing = _INSTALL.match(path)
    assert installing is not None
    app = next((a for a in world.apps.values() if a.slug == installing.group(1)), None)
    if app is None:
        return _page("404", "<p>No such App.</p>", 404)
    if method == "GET":
        return _install_page(world, app.slug, app.owner.login)
    account = (form.get("account") or [app.owner.login])[0]
    chosen = form.get("repositories") or []
    try:
        inst = install(world, app_id=app.id, account=account, repositories=chosen or None)
    except (KeyError, ValueError) as exc:
        return _page("Cannot install", f"<p>{escape(str(exc))}</p>", 422)
    names = ", ".join(r.full_name for r in world.installation_repos(inst))
    return _page(f"Installed {app.name}",
                 f"<p>Installation {inst.id} on {escape(account)}: {escape(names)}.</p>")


def _register(world: World, org: str | None, form: dict[str, list[str]],
              params: dict[str, list[str]]) -> Response:
    raw = (form.get("manifest") or [""])[0]
    try:
        manifest = json.loads(raw)
        if not isinstance(manifest, dict):
            raise ValueError("the manifest is not a JSON object")
        code = world.create_manifest_code(manifest, owner=org)
    except ValueError as exc:
        return _page("Invalid GitHub App manifest", f"<p>{escape(str(exc))}</p>", 422)
    redirect = manifest.get("redirect_url")
    if not isinstance(redirect, str):
        return _page("Invalid GitHub App manifest", "<p>redirect_url is required here.</p>",
                     422)
    query = {"code": code, **({"state": params["state"][0]} if "state" in params else {})}
    joiner = "&" if "?" in redirect else "?"
    return RedirectResponse(f"{redirect}{joiner}{urlencode(query)}", status_code=302)


def _install_page(world: World, slug: str, owner: str) -> HTMLResponse:
    boxes = "".join(
        f"<label><input type=checkbox name=repositories value='{escape(r.full_name, True)}'"
        f" checked> {escape(r.full_name)}</label><br>"
        for r in world.repos.values() if r.owner.login == owner)
    return _page(f"Install {slug}",
                 f"<form method=post><input type=hidden name=account value='{escape(owner, True)}'>"
                 f"{boxes or '<p>No repositories.</p>'}<button>Install</button></form>")
