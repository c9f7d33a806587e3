"""The config sections that connect the App to the world: its GitHub identity, the HTTP
server GitHub and people reach, and the store. Declared like every section (schema.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from service.config.checks import (
    api_root_problem,
    public_url_problem,
    store_url_problem,
    webhook_path_problem,
)
from service.config.declare import Key, key, keys
from service.config.secret import Secret

# Names of environment variables, not secrets.
ENV_PRIVATE_KEY: Final = "GITHUB_APP_PRIVATE_KEY"
ENV_WEBHOOK_SECRET: Final = "GITHUB_WEBHOOK_SECRET"  # noqa: S105
ENV_WEBHOOK_SECRET_PREVIOUS: Final = "GITHUB_WEBHOOK_SECRET_PREVIOUS"  # noqa: S105
#: ``server.admin``: the admin routes need the token, or answer anyone.
ADMIN_MODES: Final = ("token", "open")
#: ``owner/name``, as GitHub allows them.
REPOSITORY_NAME: Final = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?$)[A-Za-z0-9._-]{1,100}")


def _strip_slash(value: str) -> str:
    return value.rstrip("/")


def _secrets(values: tuple[Any, ...]) -> tuple[Secret, ...]:
    # The same secret twice (current and previous) is one secret.
    return tuple(dict.fromkeys(v for v in values if v is not None))


@dataclass(frozen=True, kw_only=True)
class GitHubConfig:
    """The App's identity and what it may act on. ``webhook_secrets``: the first is
    current; a second is accepted during a rotation."""

    app_id: int = key("int",
        "The numeric App ID from the App's settings page. Integer ≥ 1.",
        hint="the numeric App ID from the App's settings page", registration=True)
    private_key: Secret = key("secret",
        "Path to the App's private key (PEM). See Secrets.",
        env=ENV_PRIVATE_KEY, pem=True, registration=True, name='private_key_file')
    webhook_secrets: tuple[Secret, ...] = keys(
        Key(name="webhook_secret_file", kind="secret",
            doc="Path to the webhook secret used to verify `X-Hub-Signature-256`.",
            env=ENV_WEBHOOK_SECRET, registration=True),
        Key(name="previous_webhook_secret_file", kind="secret", default=None,
            doc="The old webhook secret, accepted as well during a rotation.",
            env=ENV_WEBHOOK_SECRET_PREVIOUS),
        combine=_secrets)
    api_url: str = key("str",
        "REST API root. For GitHub Enterprise Server: `https://HOST/api/v3`. Must be an "
        "`http`/`https` URL without a query; a trailing `/` is dropped.",
        'https://api.github.com', normalize=_strip_slash, check=api_root_problem)
    repositories: tuple[str, ...] = key("strs",
        "Allowlist of `owner/name`. Empty means every repository the App is installed on. "
        "Entries must look like `owner/name`; the same repository twice (in any letter case) is "
        "an error.",
        (), pattern=REPOSITORY_NAME, shape='owner/name', fold_case=True)


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    host: str = key("str",
        "Address the HTTP server listens on. A webhook receiver has to be reachable by GitHub.",
        '0.0.0.0')  # noqa: S104 - a webhook receiver listens beyond loopback
    port: int = key("int",
        "Port, 1–65535.",
        8080, maximum=65535)
    webhook_path: str = key("str",
        "Path GitHub posts deliveries to. Must start with `/`, contain no whitespace, `?` or "
        "`#`, and not be `/healthz`, `/budget`, `/metrics` or `/status`.",
        '/webhook', check=webhook_path_problem)
    admin_token: Secret | None = key("secret",
        "Path to the admin token. `GET /status`, `/budget` and `/metrics` require it "
        "(`Authorization: Bearer <token>`, or for `/status` the token as a browser's "
        "password). The first `serve` writes one beside the App's key. Without a token "
        "these routes refuse everyone, unless `admin` is `open`.",
        None, name='admin_token_file')
    admin: str = key("str",
        "`token`: the admin routes need `admin_token_file`. `open`: they answer anyone who "
        "can reach the server, which must be reachable by GitHub — every start then logs a "
        "warning. Use `open` only behind a network that keeps strangers out.",
        'token', allowed=ADMIN_MODES)
    max_body_bytes: int = key("int",
        "Larger webhook bodies are answered 413.",
        25 * 1024 * 1024, note="(25 MiB, GitHub's cap)")
    max_header_bytes: int = key("int",
        "A request whose headers grow past this is answered 431 and its connection closed, "
        "before they are buffered further (GitHub's are about 2 KiB).",
        32 * 1024, minimum=4096, note="(32 KiB)")
    header_timeout_seconds: int = key("int",
        "A request must finish sending its headers this long after it starts (a slow "
        "client holding a connection is closed).",
        10, minimum=1)
    body_timeout_seconds: int = key("int",
        "A request must finish sending its body this long after its headers.",
        30, minimum=1)
    idle_timeout_seconds: int = key("int",
        "A connection that sends nothing this long after it opens is closed (after a "
        "response, uvicorn closes an idle keep-alive connection in 5 s).",
        30, minimum=1)
    max_connections: int = key("int",
        "Open connections at once; one more is answered 503 and closed. Keep it below the "
        "process's file descriptor limit (serve raises its own soft limit to the hard one).",
        512, minimum=1)
    max_buffered_body_bytes: int = key("int",
        "Webhook body bytes held at once across every request not yet verified; a request "
        "that would pass it is answered 503 (with Retry-After) before its body is read.",
        64 * 1024 * 1024, minimum=1024, note="(64 MiB)")
    public_url: str | None = key("str?",
        "The URL GitHub and your browser reach this server at, e.g. "
        "`https://reviews.example.com` (a path is allowed, for a reverse proxy; no query or "
        "fragment; a trailing `/` is dropped). Used only to register the App: the webhook URL "
        "is `{public_url}{webhook_path}`, GitHub's redirect goes to "
        "`{public_url}/setup/callback`. `serve --public-url` overrides it; without either, "
        "`http://{host}:{port}` (`localhost` for a wildcard host).",
        None, check=public_url_problem, normalize=_strip_slash)


@dataclass(frozen=True, kw_only=True)
class StoreConfig:
    path: str = key("str",
        "The SQLite file: the embedded store, for one host. Relative to the config file's "
        "directory; `Config.store.path` is always absolute. Its directory also holds the "
        "checkout cache and the engine's homes, with `url` too (then the file is unused). "
        "See docs/STORAGE.md.",
        "state.db")
    url: str | None = key("str?",
        "A PostgreSQL database instead of the file, for several hosts: "
        "`postgresql://user@host:5432/db` (TLS and other libpq options as URL parameters, "
        "e.g. `?sslmode=verify-full`). It must not hold the password. See "
        "docs/STORAGE.md.",
        None, check=store_url_problem)
    password: Secret | None = key("secret",
        "Path to the PostgreSQL password, when `url` needs one and libpq's own `PGPASSWORD` "
        "or `~/.pgpass` does not give it.",
        None, name="password_file")
