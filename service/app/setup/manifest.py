"""The App's manifest and the URLs of GitHub's manifest flow. Pure: no I/O, no clock.

``MANIFEST`` is the document in the repository's ``app-manifest.json`` (a test keeps the
two equal); it lives here too because an installed wheel carries the package, not the
repository's top level. Registration fills in the three URLs that depend on where this
server is reachable (``build_manifest``) and posts it to GitHub's "new App" page
(``registration_url``).
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final
from urllib.parse import quote, urlencode

from service.config.checks import public_url_problem
from service.config.connections import ServerConfig

__all__ = [
    "MANIFEST",
    "build_manifest",
    "install_url",
    "public_url_for",
    "registration_url",
    "valid_login",
]

#: What the App asks of GitHub: the minimal permissions and the events it acts on
#: (GITHUB-PLATFORM.md §1.3). ``url``, ``hook_attributes.url`` and ``redirect_url`` are
#: placeholders that ``build_manifest`` replaces.
MANIFEST: Final[dict[str, Any]] = {
    "name": "pr-review-agent",
    "url": "https://github.com/apps/pr-review-agent",
    "description": "A self-hosted AI pull-request reviewer with a hard token budget shared "
                   "with people. Reviews pull requests when they open and when an allowed "
                   "person writes @claude review, @claude describe or @claude ask.",
    "hook_attributes": {"url": "https://example.invalid/webhook", "active": True},
    "redirect_url": "https://example.invalid/setup/callback",
    "public": False,
    "default_permissions": {
        "pull_requests": "write",
        "issues": "write",
        "contents": "read",
        "metadata": "read",
        "checks": "write",
    },
    "default_events": ["pull_request", "issue_comment", "pull_request_review_comment"],
}

#: Where GitHub sends the browser back after the App is created.
CALLBACK_PATH: Final = "/setup/callback"

# GitHub logins and organisation names: letters, digits and single hyphens, 1-39 chars.
_LOGIN: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}")
_WILDCARD_HOSTS: Final = ("0.0.0.0", "::", "")  # noqa: S104 - compared, not bound


def public_url_for(server: ServerConfig, override: str | None = None) -> str:
    """The URL GitHub and the operator's browser reach this server at.

    ``override`` (``serve --public-url``) first, then ``server.public_url``, then
    ``http://{host}:{port}`` with a wildcard host shown as ``localhost``. Raises
    ``ValueError`` for an override that is not an http(s) URL.
    """
    if override is not None:
        problem = public_url_problem(override)
        if problem is not None:
            raise ValueError(f"--public-url {problem}")
        return override.rstrip("/")
    if server.public_url:
        return server.public_url.rstrip("/")
    host = "localhost" if server.host in _WILDCARD_HOSTS else server.host
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{server.port}"


def build_manifest(public_url: str, webhook_url: str) -> dict[str, Any]:
    """``MANIFEST`` with this server's URLs: the homepage, the webhook and the redirect."""
    manifest = copy.deepcopy(MANIFEST)
    manifest["url"] = public_url
    manifest["hook_attributes"]["url"] = webhook_url
    manifest["redirect_url"] = f"{public_url}{CALLBACK_PATH}"
    return manifest


def valid_login(name: str) -> bool:
    """Whether ``name`` can be a GitHub account or organisation login."""
    return _LOGIN.fullmatch(name) is not None


def registration_url(web_url: str, state: str, org: str | None = None) -> str:
    """The page the manifest is posted to: the personal account's, or ``org``'s."""
    if org is not None and not valid_login(org):
        raise ValueError(f"not a GitHub organisation name: {org!r}")
    where = f"/organizations/{quote(org)}" if org else ""
    return f"{web_url}{where}/settings/apps/new?{urlencode({'state': state})}"


def install_url(html_url: str) -> str:
    """Where the App is installed on repositories, from its ``html_url``."""
    return f"{html_url.rstrip('/')}/installations/new"
