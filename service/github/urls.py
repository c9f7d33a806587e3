"""URLs for the GitHub REST API: the base from config, paths under it, ``Link`` headers.

Pure functions. The base is either ``https://api.github.com`` or a GitHub Enterprise
Server's ``https://HOST/api/v3``; a path (``/repos/o/r``) is appended to the base's own
path, never resolved against the host root, which is the mistake that turns
``https://HOST/api/v3`` + ``/repos`` into ``https://HOST/repos`` on GHES.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote, urlsplit, urlunsplit

_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,<]+)*)")
_REL = re.compile(r"""\brel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def normalize_api_base(base: str) -> str:
    """``https://HOST/api/v3/`` → ``https://HOST/api/v3``; rejects anything not http(s)."""
    parts = urlsplit(base.strip())
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise ValueError(f"GitHub API URL must be an absolute http(s) URL, got {base!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"GitHub API URL must not carry a query or fragment, got {base!r}")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def api_url(base: str, path: str) -> str:
    """Join an API path onto the (normalised) base.

    ``path`` is either ``/resource/...`` (appended to the base's path) or an absolute URL
    that lies under the base (a ``Link`` header's ``next``), returned as is. Anything else
    raises ``ValueError``: the client never sends a credential to another origin.
    """
    base = normalize_api_base(base)
    if path.startswith(("https://", "http://")):
        if not is_under_base(base, path):
            raise ValueError("refusing a URL outside the configured GitHub API base")
        return path
    if not path.startswith("/"):
        raise ValueError(f"API path must start with '/', got {path!r}")
    return base + path


#: The path the client is given for a GraphQL call; ``graphql_url`` says where it goes.
GRAPHQL_PATH: Final = "/graphql"


def graphql_url(base: str) -> str:
    """GitHub's GraphQL endpoint for the REST base ``base``: ``https://api.github.com``
    serves it at ``/graphql``; GitHub Enterprise Server serves REST at ``/api/v3`` and
    GraphQL beside it, at ``https://HOST/api/graphql``."""
    base = normalize_api_base(base)
    if base.endswith("/api/v3"):
        return base[: -len("/v3")] + "/graphql"
    return base + "/graphql"


def is_under_base(base: str, url: str) -> bool:
    """True when ``url`` has the base's scheme and host and lies under its path."""
    b = urlsplit(normalize_api_base(base))
    u = urlsplit(url)
    if (u.scheme, u.netloc.lower()) != (b.scheme, b.netloc.lower()):
        return False
    return b.path in ("", u.path) or u.path.startswith(b.path + "/")


def parse_link_header(value: str | None) -> dict[str, str]:
    """``<url>; rel="next", <url>; rel="last"`` → ``{"next": url, "last": url}``.

    A link with several relations (``rel="next last"``) is listed under each. Malformed
    parts are skipped: a missing ``next`` simply ends pagination.
    """
    links: dict[str, str] = {}
    if not value:
        return links
    for match in _LINK.finditer(value):
        url, params = match.group(1).strip(), match.group(2)
        rel = _REL.search(params)
        if not url or rel is None:
            continue
        for name in (rel.group(1) or rel.group(2) or "").split():
            links.setdefault(name.lower(), url)
    return links


def repo_path(owner: str, name: str) -> str:
    """``/repos/{owner}/{name}`` with both parts validated (no ``/``, no ``..``)."""
    for part in (owner, name):
        if not _NAME.match(part) or part in (".", ".."):
            raise ValueError(f"not a GitHub owner or repository name: {part!r}")
    return f"/repos/{quote(owner, safe='')}/{quote(name, safe='')}"


def web_url_for(api_url: str) -> str:
    """GitHub's web root for a REST API root.

    ``https://api.github.com`` → ``https://github.com``; GitHub Enterprise Server's
    ``https://HOST/api/v3`` → ``https://HOST``; GHE.com's ``https://api.SUB.ghe.com`` →
    ``https://SUB.ghe.com``. Anything else (a simulator, a proxy) is its own web root.
    """
    parts = urlsplit(api_url.rstrip("/"))
    host = parts.netloc
    path = parts.path
    if host.lower() == "api.github.com":
        host = "github.com"
    elif host.lower().startswith("api.") and host.lower().endswith(".ghe.com"):
        host = host[len("api."):]
    if path.endswith("/api/v3"):
        path = path[: -len("/api/v3")]
    return urlunsplit((parts.scheme, host, path, "", ""))


def pull_url(web_url: str, repo: str, pr_number: int, anchor: str | None = None) -> str:
    """A pull request's page (``#anchor``: a review's or a comment's place on it)."""
    return f"{web_url}/{repo}/pull/{pr_number}" + (f"#{anchor}" if anchor else "")
