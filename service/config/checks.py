"""What a key's kind cannot say: shape checks on one value, and checks across keys.

A one-value check (``check=`` on a declaration) returns why the value is refused, or
None. A section check runs once its keys are read, with every value, and reports through
``problem(key, message)``; the budget's arithmetic is one, and runs only when every
number in the section is valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from service.config.reader import show

__all__ = ["DEFAULT_USD_PER_MILLION_TOKENS", "SECTION_CHECKS", "api_root_problem",
           "engine_api_url_problem", "env_name_problem", "github_credentials",
           "mention_problem", "public_url_problem", "store_url_problem",
           "webhook_path_problem"]

# Routes the web app serves itself; a webhook path on top of one would shadow it.
_RESERVED_PATHS: Final = ("/healthz", "/budget", "/metrics", "/status")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: What a run is assumed to cost, in dollars per million tokens, until enough runs have
#: reported their cost (see service/budget/dollars.py). List prices of the larger models.
DEFAULT_USD_PER_MILLION_TOKENS: Final = 15

Problem = Callable[[str, str], None]


def check_name_problem(name: str) -> str | None:
    """``checks.name``: what GitHub shows and branch protection matches, 1–100 characters
    (the describe check's suffix included) with no line break."""
    if not name.strip():
        return "must not be empty"
    if len(name) > 88 or any(c in name for c in "\r\n"):
        return "must be one line of at most 88 characters"
    return None


def api_root_problem(url: str) -> str | None:
    """``github.api_url``: an http(s) URL without a query (its trailing ``/`` dropped)."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
        return f"must be an http(s) URL without a query, got {show(url)}"
    return None


def webhook_path_problem(path: str) -> str | None:
    if not path.startswith("/") or re.search(r"[\s?#]", path):
        return f"must be a path starting with '/', got {show(path)}"
    if path in _RESERVED_PATHS:
        return f"{path} is a route the service already serves"
    return None


def public_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the server's public URL, or None.

    An http(s) URL with a host and no query or fragment; a path is allowed (a reverse
    proxy may serve the agent under one).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be an http(s) URL with a host, got {show(url)}"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return f"must not have a query or a fragment, got {show(url)}"
    if re.search(r"\s", url):
        return f"must not contain whitespace, got {show(url)}"
    return None


def store_url_problem(url: str) -> str | None:
    """``store.url``: a PostgreSQL URL, without a password in it (it would be logged)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        return f"must be a postgresql:// URL, got {show(url)}"
    if parts.password is not None:
        return ("must not hold a password: put it in store.password_file, or give it to "
                "libpq as PGPASSWORD or in ~/.pgpass")
    return None


def _store(values: Mapping[str, Any], problem: Problem) -> None:
    # ``path`` may stand beside ``url``: the file is then unused, but its directory is where
    # the checkout cache and the engine's homes go (a read-only config directory, as in a
    # Kubernetes ConfigMap, cannot hold them).
    if values["password"] is not None and values["url"] is None:
        problem("password_file", "is for store.url; the SQLite file needs none")


def mention_problem(mention: str) -> str | None:
    if not mention.startswith("@") or len(mention) < 2 or re.search(r"\s", mention):
        return f"must be one word starting with '@', got {show(mention)}"
    return None


def engine_api_url_problem(url: str) -> str | None:
    if not url.startswith(("http://", "https://")):
        return f"must be an http(s) URL, got {show(url)}"
    return None


def env_name_problem(name: str) -> str | None:
    if not _ENV_NAME.fullmatch(name):
        return f"must be an environment variable name, got {show(name)}"
    return None


# -- across keys --------------------------------------------------------------------------


def github_credentials(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """``engine.credential_env``: the engine never sees a GitHub credential, whatever the
    file says (one problem per such entry, named by its index)."""
    return [(f"[{index}]", f"{name} is a GitHub variable; the engine never gets GitHub "
                           "credentials")
            for index, name in enumerate(names) if name.upper().startswith(("GH_", "GITHUB_"))]


def _engine(values: Mapping[str, Any], problem: Problem) -> None:
    kind = values["kind"]
    if kind in ("anthropic", "openai_compatible") and not values["model"]:
        problem("model", f"is required for kind {kind}")
    if kind == "openai_compatible" and not values["api_url"]:
        problem("api_url", "is required for kind openai_compatible "
                           "(e.g. http://localhost:11434/v1)")


def _budget(values: Mapping[str, Any], problem: Problem) -> None:
    share = values["reviewer_share_pct"]
    run, monthly = values["max_run_tokens"], values["monthly_usd"]
    session = values["session_tokens"] * share // 100
    daily = values["weekly_tokens"] * share // 100 // 7
    # A run is admitted only while every window has max_run_tokens left, so one larger
    # than the smallest window could never be admitted: an agent that silently reviews
    # nothing, by arithmetic nobody did.
    smallest = min((session, "session allowance", "session_tokens"),
                   (daily, "daily allowance", "weekly_tokens ÷ 7"))
    if run > smallest[0]:
        problem("max_run_tokens",
                f"{run} does not fit in the {smallest[1]} of {smallest[0]} "
                f"tokens ({smallest[2]} × {share}%); no run could ever be admitted")
    else:
        # The same arithmetic, per person and per installation: a cap below one run
        # admits nobody at all.
        for name, whose in (("per_actor_pct", "no one's"),
                            ("per_installation_pct", "no installation's")):
            pct = values[name]
            if run > smallest[0] * pct // 100:
                problem(name, f"{pct}% of the {smallest[1]} is {smallest[0] * pct // 100} "
                              f"tokens, less than max_run_tokens {run}; {whose} run could "
                              "ever be admitted")
    run_usd = run * DEFAULT_USD_PER_MILLION_TOKENS / 1_000_000
    if monthly is not None and monthly < run_usd:
        problem("monthly_usd",
                f"${monthly:.2f} cannot pay for one run of max_run_tokens {run} at the "
                f"starting estimate of ${DEFAULT_USD_PER_MILLION_TOKENS} per million tokens "
                f"(${run_usd:.2f})")


#: Section name -> its check across keys, and whether it needs every key valid first.
SECTION_CHECKS: Final[dict[str, tuple[Callable[[Mapping[str, Any], Problem], None], bool]]] = {
    "store": (_store, False),
    "engine": (_engine, False),
    "budget": (_budget, True),
}
