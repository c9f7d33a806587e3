"""Typed, strict configuration.

The whole schema is a tree of frozen dataclasses. ``load_config(path, environ)`` reads a
YAML file and the environment (both passed in, so tests and reloads need no globals)
and returns a ``Config`` or raises ``ConfigError`` listing *every* problem found, each
prefixed by its key path. ``parse_config`` does the same for an in-memory document, and
``describe_config`` turns a valid config into the summary ``check-config`` prints.
docs/CONFIG.md is the operator's reference for every key.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import yaml
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from service.engine.sandbox import ISOLATIONS
from service.secret import Secret


@dataclass(frozen=True)
class GitHubConfig:
    app_id: int
    private_key: Secret  # PEM, from private_key_file or env GITHUB_APP_PRIVATE_KEY
    webhook_secrets: tuple[Secret, ...]  # first is current; more accepted during a rotation
    api_url: str = "https://api.github.com"
    repositories: tuple[str, ...] = ()  # "owner/name"; empty = every installed repository


@dataclass(frozen=True)
class ServerConfig:
    host: str = "0.0.0.0"  # noqa: S104 - a webhook receiver has to listen beyond loopback
    port: int = 8080
    webhook_path: str = "/webhook"
    admin_token: Secret | None = None  # from admin_token_file; protects GET /budget
    max_body_bytes: int = 25 * 1024 * 1024
    #: The URL GitHub and the operator's browser reach this server at; used to register
    #: the App (webhook and redirect URLs). None: ``http://{host}:{port}``.
    public_url: str | None = None


@dataclass(frozen=True)
class StoreConfig:
    path: str = "state.db"


@dataclass(frozen=True)
class PollerConfig:
    interval_seconds: int = 300


@dataclass(frozen=True)
class TriggersConfig:
    mention: str = "@claude"
    auto_review: bool = True
    on_push: bool = False
    allowed_associations: tuple[str, ...] = ("OWNER", "MEMBER", "COLLABORATOR")
    allowed_users: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkersConfig:
    count: int = 2
    lease_seconds: int = 1200


@dataclass(frozen=True)
class EngineConfig:
    kind: str = "claude_code"  # claude_code | anthropic | openai_compatible
    command: str = "claude"
    model: str | None = None
    max_turns: int = 30
    wall_clock_seconds: int = 900
    #: Environment variables passed to ``claude`` (its credentials); nothing else is.
    credential_env: tuple[str, ...] = ("CLAUDE_CODE_OAUTH_TOKEN",)
    kill_grace_seconds: int = 5
    api_url: str | None = None        # anthropic (default api.anthropic.com) / openai_compatible
    api_key_env: str | None = None    # the variable holding the API key
    max_tokens: int = 8192            # per model answer (anthropic, openai_compatible)
    response_format: str = "json_object"  # openai_compatible: json_object|json_schema|none
    #: claude_code: ``landlock`` confines each run to its worktree (docs/SECURITY.md);
    #: ``none`` runs it with this user's whole file access.
    isolation: str = "landlock"
    isolation_read_paths: tuple[str, ...] = ()   # more trees the engine may read
    isolation_write_paths: tuple[str, ...] = ()  # more trees the engine may write


@dataclass(frozen=True)
class ReviewConfig:
    excluded_paths: tuple[str, ...] = ("*.lock", "**/vendor/**")
    max_diff_lines: int = 5000


@dataclass(frozen=True)
class PublishConfig:
    """How results reach GitHub. ``dry_run`` records without posting (reloadable);
    ``describe_updates_body`` writes ``@claude describe`` into the pull request body
    (between marked lines, keeping the author's text) instead of posting a comment."""

    dry_run: bool = False
    describe_updates_body: bool = False


@dataclass(frozen=True)
class RetentionConfig:
    """Purging review content from ``runs`` once a pull request closes or merges,
    ``delay_hours`` after the close (0: at the next sweep). The ledger is never purged."""

    purge_after_close: bool = True
    delay_hours: int = 0


#: What a run is assumed to cost, in dollars per million tokens, until enough runs have
#: reported their cost (see service/budget/dollars.py). List prices of the larger models.
DEFAULT_USD_PER_MILLION_TOKENS: Final = 15


@dataclass(frozen=True)
class BudgetConfig:
    """The spending rails. ``enabled: false`` is an emergency brake: nothing is admitted.

    Limits are derived once, here, and floored to whole tokens after the share (and the
    seventh, for the daily window) are applied; the share never appears elsewhere.

    The first five fields are the *shared* policy (one ``budget_policy`` row that every
    process on a store obeys); ``per_actor_pct`` (100 = no per-person cap),
    ``max_reviews_per_pr`` (runs per pull request per 24 h) and ``monthly_usd`` (None =
    no dollar cap) are this process's own.
    """

    enabled: bool
    session_tokens: int
    weekly_tokens: int
    max_run_tokens: int
    reviewer_share_pct: int = 40
    per_actor_pct: int = 100
    max_reviews_per_pr: int = 5
    monthly_usd: float | None = None

    @property
    def session_limit(self) -> int:
        return self.session_tokens * self.reviewer_share_pct // 100

    @property
    def weekly_limit(self) -> int:
        return self.weekly_tokens * self.reviewer_share_pct // 100

    @property
    def daily_limit(self) -> int:
        return self.weekly_tokens * self.reviewer_share_pct // 100 // 7


@dataclass(frozen=True)
class Config:
    github: GitHubConfig
    triggers: TriggersConfig
    budget: BudgetConfig
    server: ServerConfig = field(default_factory=ServerConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    poller: PollerConfig = field(default_factory=PollerConfig)
    workers: WorkersConfig = field(default_factory=WorkersConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    review: ReviewConfig = field(default_factory=ReviewConfig)
    publish: PublishConfig = field(default_factory=PublishConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)


class ConfigError(Exception):
    """Every problem found in one config file, each prefixed by its key path.

    ``registration_needed`` is True only on ``MissingCredentials``: callers test the flag
    to tell "register the App" from a file that needs fixing.
    """

    registration_needed: bool = False

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class MissingCredentials(ConfigError):
    """The file is valid except that the GitHub App is not registered yet.

    Raised when the only problems are the App's missing credentials: no ``github``
    section, or one without ``app_id`` whose private key and webhook secret are neither
    in the environment nor in files that exist yet. ``problems`` are the usual messages;
    ``config`` is everything else the file says, parsed and valid, with a placeholder
    ``github`` (``app_id`` 0, no secrets) that keeps only ``api_url`` and
    ``repositories``: what registration needs to know (service/setup.py).
    """

    registration_needed = True

    def __init__(self, problems: list[str], config: Config) -> None:
        super().__init__(problems)
        self.config = config


# --- Loading -------------------------------------------------------------------------------

# Names of environment variables, not secrets.
ENV_PRIVATE_KEY: Final = "GITHUB_APP_PRIVATE_KEY"
ENV_WEBHOOK_SECRET: Final = "GITHUB_WEBHOOK_SECRET"  # noqa: S105
ENV_WEBHOOK_SECRET_PREVIOUS: Final = "GITHUB_WEBHOOK_SECRET_PREVIOUS"  # noqa: S105

ENGINE_KINDS: Final = ("claude_code", "anthropic", "openai_compatible")
ASSOCIATIONS: Final = (
    "OWNER",
    "MEMBER",
    "COLLABORATOR",
    "CONTRIBUTOR",
    "FIRST_TIME_CONTRIBUTOR",
    "FIRST_TIMER",
    "MANNEQUIN",
    "NONE",
)
# Routes the web app serves itself; a webhook path on top of one would shadow it.
_RESERVED_PATHS: Final = ("/healthz", "/budget")
# Secret and config files are small; the cap keeps a typo such as /dev/zero from hanging.
_MAX_FILE_BYTES: Final = 1024 * 1024

_REPO_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?$)[A-Za-z0-9._-]{1,100}")
_LOGIN_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
_PEM_RE: Final = re.compile(
    r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.+-----END \1PRIVATE KEY-----", re.DOTALL
)
_MISSING: Final = object()


def _show(value: object) -> str:
    """A value as the operator wrote it, short: for "got ..." in a problem message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


class _Section:
    """One mapping of the YAML tree: typed reads that record problems instead of raising.

    Every read names a key as known; ``finish()`` then reports the keys nobody read as
    unknown, with the nearest known key as a suggestion. A section that is missing or not
    a mapping is read as empty and ``quiet``: its children do not each report "required"
    on top of the one problem already recorded for the section.
    """

    def __init__(
        self, problems: list[str], path: str, data: Mapping[object, object], *, quiet: bool = False
    ) -> None:
        self._problems = problems
        self._path = path
        self._data = data
        self._known: list[str] = []
        self.quiet = quiet

    def key_path(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key

    def problem(self, key: str, message: str) -> None:
        self._problems.append(f"{self.key_path(key)}: {message}")

    def mark(self) -> int:
        return len(self._problems)

    def failed_since(self, mark: int) -> bool:
        return len(self._problems) > mark

    def since(self, mark: int) -> list[str]:
        """The problems recorded (anywhere in the tree) after ``mark``."""
        return self._problems[mark:]

    def peek(self, key: str) -> object:
        """The raw value of ``key`` (or ``_MISSING``) without counting it as read."""
        return self._data.get(key, _MISSING)

    def required(self, key: str, hint: str = "") -> None:
        if not self.quiet:
            self.problem(key, f"required{f' ({hint})' if hint else ''}")

    def get(self, key: str) -> object:
        self._known.append(key)
        return self._data.get(key, _MISSING)

    def section(self, key: str, *, required: bool = False, hint: str = "") -> _Section:
        value = self.get(key)
        path = self.key_path(key)
        if isinstance(value, Mapping):
            return _Section(self._problems, path, value)
        if value is _MISSING:
            if required and not self.quiet:
                self.problem(key, f"required section is missing{f' ({hint})' if hint else ''}")
            return _Section(self._problems, path, {}, quiet=required)
        self.problem(key, f"must be a mapping, got {_show(value)}")
        return _Section(self._problems, path, {}, quiet=True)

    def integer(
        self,
        key: str,
        default: int | None,
        *,
        minimum: int = 1,
        maximum: int | None = None,
        hint: str = "",
    ) -> int:
        """An int within bounds; ``default=None`` makes the key required. bool is refused."""
        value = self.get(key)
        if value is _MISSING:
            if default is None:
                self.required(key, hint)
                return 0
            return default
        # bool subclasses int: without this check `weekly_tokens: true` is a 1-token ceiling.
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(key, f"must be an integer, got {_show(value)}")
            return 0
        if value < minimum or (maximum is not None and value > maximum):
            bounds = (
                f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            )
            self.problem(key, f"must be {bounds}, got {value}")
            return 0
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            self.problem(key, f"must be true or false, got {_show(value)}")
            return default
        return value

    def string(self, key: str, default: str) -> str:
        value = self.get(key)
        if value is _MISSING:
            return default
        return self._check_string(key, value)

    def optional_string(self, key: str) -> str | None:
        value = self.get(key)
        if value is _MISSING or value is None:
            return None
        return self._check_string(key, value)

    def _check_string(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            self.problem(key, f"must be a string, got {_show(value)}")
            return ""
        if not value.strip():
            self.problem(key, "must not be empty")
            return ""
        return value

    def strings(
        self,
        key: str,
        default: tuple[str, ...],
        *,
        allowed: tuple[str, ...] = (),
        pattern: re.Pattern[str] | None = None,
        shape: str = "",
        fold_case: bool = False,
    ) -> tuple[str, ...]:
        """A list of non-empty strings, each in ``allowed`` or matching ``pattern``, no repeats."""
        value = self.get(key)
        if value is _MISSING:
            return default
        if not isinstance(value, list):
            self.problem(key, f"must be a list, got {_show(value)}")
            return default
        items: list[str] = []
        seen: set[str] = set()
        for index, item in enumerate(value):
            where = f"{key}[{index}]"
            if not isinstance(item, str) or not item.strip():
                self.problem(where, f"must be a non-empty string, got {_show(item)}")
                continue
            if allowed and item not in allowed:
                close = difflib.get_close_matches(item.upper(), allowed, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]}?)" if close else ""
                self.problem(where, f"must be one of {', '.join(allowed)}, got {_show(item)}{hint}")
                continue
            if pattern is not None and not pattern.fullmatch(item):
                self.problem(where, f"must look like {shape}, got {_show(item)}")
                continue
            folded = item.casefold() if fold_case else item
            if folded in seen:
                self.problem(where, f"{_show(item)} is listed more than once")
                continue
            seen.add(folded)
            items.append(item)
        return tuple(items)

    def finish(self) -> None:
        """Report every key of this mapping that no read asked for."""
        for key in self._data:
            if not isinstance(key, str):
                self._problems.append(f"{self._path or '(top level)'}: unknown key {_show(key)}")
                continue
            if key in self._known:
                continue
            close = difflib.get_close_matches(key, self._known, n=1, cutoff=0.6)
            if close:
                self.problem(key, f"unknown key (did you mean {close[0]}?)")
            else:
                self.problem(key, f"unknown key (valid keys: {', '.join(sorted(self._known))})")


def _resolve(base_dir: Path, value: str) -> Path:
    """Relative paths in the config are relative to the config file's directory."""
    path = Path(value)
    return path if path.is_absolute() else base_dir / path


def _read_text(path: Path) -> str:
    """Read a small UTF-8 file; raise ``ValueError`` with a message that never quotes it."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(_MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ValueError(f"cannot read {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"cannot read {path}: it is a directory") from None
    except PermissionError:
        raise ValueError(f"cannot read {path}: permission denied") from None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    if len(raw) > _MAX_FILE_BYTES:
        raise ValueError(f"{path} is larger than {_MAX_FILE_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None


def _private_key_problem(pem: str) -> str | None:
    """Why ``pem`` is not a usable GitHub App key, or None. Never quotes the key."""
    if not _PEM_RE.search(pem):
        return "is not a PEM private key (expected a -----BEGIN ... PRIVATE KEY----- block)"
    try:
        key = load_pem_private_key(pem.encode("utf-8"), password=None)
    except TypeError:
        return "is encrypted with a passphrase; the App key must be stored unencrypted"
    except (ValueError, UnsupportedAlgorithm):
        return "holds a PEM block that is not a readable private key"
    if not isinstance(key, rsa.RSAPrivateKey):
        return "is not an RSA key (GitHub Apps sign their JWTs with RS256)"
    return None


def _secret(
    s: _Section,
    key: str,
    env: str | None,
    environ: Mapping[str, str],
    base_dir: Path,
    *,
    required: bool,
    pem: bool = False,
) -> Secret | None:
    """A secret from ``key`` (a file path) or the environment variable ``env``, never both."""
    mark = s.mark()
    file_value = s.optional_string(key)
    if s.failed_since(mark):
        return None
    env_value = environ.get(env) if env is not None else None
    if file_value is not None and env_value is not None:
        s.problem(key, f"set here and in the environment variable {env}; keep one")
        return None
    origin: Path | None = None
    if file_value is not None:
        path = origin = _resolve(base_dir, file_value)
        source = str(path)
        try:
            text = _read_text(path)
        except ValueError as exc:
            s.problem(key, str(exc))
            return None
    elif env_value is not None:
        source = f"the environment variable {env}"
        text = env_value
        if pem and "\n" not in text:
            # .env files and CI variables often carry a PEM on one line with literal \n.
            text = text.replace("\\n", "\n")
    else:
        if required:
            s.required(key, f"a file path, or set the environment variable {env}")
        return None
    # A trailing newline from `echo secret > file` is never part of the secret.
    text = text.strip()
    if not text:
        s.problem(key, f"{source} is empty")
        return None
    if pem:
        why = _private_key_problem(text)
        if why is not None:
            s.problem(key, f"{source} {why}")
            return None
    return Secret(text, origin)


def _unregistered(data: object, environ: Mapping[str, str], base_dir: Path) -> bool:
    """Whether the ``github`` section (raw) says the App has not been registered yet.

    True for a missing section, or one without ``app_id`` whose key and webhook secret are
    given neither by the environment nor by a file that exists. A section that names an
    ``app_id`` was registered: its missing key is a lost secret, not a first run.
    """
    if ENV_PRIVATE_KEY in environ or ENV_WEBHOOK_SECRET in environ:
        return False
    if data is _MISSING:
        return True
    if not isinstance(data, Mapping) or "app_id" in data:
        return False
    for key in ("private_key_file", "webhook_secret_file"):
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            return False
        if os.path.exists(_resolve(base_dir, value)):
            return False
    return True


def _github(
    top: _Section, environ: Mapping[str, str], base_dir: Path
) -> tuple[GitHubConfig, list[str]]:
    """The ``github`` section, and the problems that only say "not registered yet".

    The second item is empty unless the App is unregistered (``_unregistered``); then it
    holds the section's missing-credential problems, so that ``parse_config`` can tell a
    file whose one remaining step is registration from a file with real mistakes.
    """
    unregistered = _unregistered(top.peek("github"), environ, base_dir)
    absent: list[str] = []
    mark = top.mark()
    s = top.section(
        "github",
        required=True,
        hint="needs app_id, and the private key and webhook secret from *_file keys "
        "or the environment",
    )
    absent += s.since(mark)
    mark = s.mark()
    app_id = s.integer("app_id", None, hint="the numeric App ID from the App's settings page")
    absent += s.since(mark)
    api_url = s.string("api_url", GitHubConfig.api_url).rstrip("/")
    if api_url:
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            s.problem("api_url", f"must be an http(s) URL without a query, got {_show(api_url)}")
    repositories = s.strings(
        "repositories", (), pattern=_REPO_RE, shape="owner/name", fold_case=True
    )
    mark = s.mark()
    private_key = _secret(
        s, "private_key_file", ENV_PRIVATE_KEY, environ, base_dir, required=True, pem=True
    )
    current = _secret(
        s, "webhook_secret_file", ENV_WEBHOOK_SECRET, environ, base_dir, required=True
    )
    absent += s.since(mark)
    previous = _secret(
        s,
        "previous_webhook_secret_file",
        ENV_WEBHOOK_SECRET_PREVIOUS,
        environ,
        base_dir,
        required=False,
    )
    s.finish()
    secrets = tuple(x for x in (current, previous) if x is not None)
    return GitHubConfig(
        app_id=app_id,
        private_key=private_key or Secret(""),
        webhook_secrets=tuple(dict.fromkeys(secrets)),  # the same secret twice is one secret
        api_url=api_url,
        repositories=repositories,
    ), (absent if unregistered else [])


def _server(top: _Section, environ: Mapping[str, str], base_dir: Path) -> ServerConfig:
    s = top.section("server")
    default = ServerConfig()
    host = s.string("host", default.host)
    port = s.integer("port", default.port, maximum=65535)
    webhook_path = s.string("webhook_path", default.webhook_path)
    if webhook_path and (not webhook_path.startswith("/") or re.search(r"[\s?#]", webhook_path)):
        s.problem("webhook_path", f"must be a path starting with '/', got {_show(webhook_path)}")
    elif webhook_path in _RESERVED_PATHS:
        s.problem("webhook_path", f"{webhook_path} is a route the service already serves")
    admin_token = _secret(s, "admin_token_file", None, environ, base_dir, required=False)
    max_body_bytes = s.integer("max_body_bytes", default.max_body_bytes)
    public_url = s.optional_string("public_url")
    if public_url is not None:
        why = public_url_problem(public_url)
        if why is not None:
            s.problem("public_url", why)
        public_url = public_url.rstrip("/")
    s.finish()
    return ServerConfig(
        host=host,
        port=port,
        webhook_path=webhook_path,
        admin_token=admin_token,
        max_body_bytes=max_body_bytes,
        public_url=public_url,
    )


def public_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the server's public URL, or None.

    An http(s) URL with a host and no query or fragment; a path is allowed (a reverse
    proxy may serve the agent under one).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"must be an http(s) URL with a host, got {_show(url)}"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return f"must not have a query or a fragment, got {_show(url)}"
    if re.search(r"\s", url):
        return f"must not contain whitespace, got {_show(url)}"
    return None


def _triggers(top: _Section) -> TriggersConfig:
    s = top.section("triggers", required=True, hint="write `triggers: {}` to take every default")
    default = TriggersConfig()
    mention = s.string("mention", default.mention)
    if mention and (not mention.startswith("@") or len(mention) < 2 or re.search(r"\s", mention)):
        s.problem("mention", f"must be one word starting with '@', got {_show(mention)}")
    config = TriggersConfig(
        mention=mention,
        auto_review=s.boolean("auto_review", default.auto_review),
        on_push=s.boolean("on_push", default.on_push),
        allowed_associations=s.strings(
            "allowed_associations", default.allowed_associations, allowed=ASSOCIATIONS
        ),
        allowed_users=s.strings(
            "allowed_users", (), pattern=_LOGIN_RE, shape="a GitHub login", fold_case=True
        ),
    )
    s.finish()
    return config


ENGINE_RESPONSE_FORMATS: Final = ("json_object", "json_schema", "none")
_ABSOLUTE_PATH = re.compile(r"/.*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _engine(top: _Section) -> EngineConfig:
    s = top.section("engine")
    default = EngineConfig()
    kind = s.string("kind", default.kind)
    if kind and kind not in ENGINE_KINDS:
        s.problem("kind", f"must be one of {', '.join(ENGINE_KINDS)}, got {_show(kind)}")
    response_format = s.string("response_format", default.response_format)
    if response_format not in ENGINE_RESPONSE_FORMATS:
        s.problem("response_format", f"must be one of {', '.join(ENGINE_RESPONSE_FORMATS)}, "
                                     f"got {_show(response_format)}")
    credential_env = s.strings("credential_env", default.credential_env, pattern=_ENV_NAME,
                               shape="an environment variable name")
    for index, name in enumerate(credential_env):
        # The engine never sees a GitHub credential, whatever the file says.
        if name.upper().startswith(("GH_", "GITHUB_")):
            s.problem(f"credential_env[{index}]",
                      f"{name} is a GitHub variable; the engine never gets GitHub credentials")
    api_url = s.optional_string("api_url")
    if api_url is not None and not api_url.startswith(("http://", "https://")):
        s.problem("api_url", f"must be an http(s) URL, got {_show(api_url)}")
    api_key_env = s.optional_string("api_key_env")
    if api_key_env is not None and not _ENV_NAME.fullmatch(api_key_env):
        s.problem("api_key_env", f"must be an environment variable name, got {_show(api_key_env)}")
    isolation = s.string("isolation", default.isolation)
    if isolation not in ISOLATIONS:
        s.problem("isolation", f"must be one of {', '.join(ISOLATIONS)}, got {_show(isolation)}")
    sandbox_paths = {
        key: s.strings(key, (), pattern=_ABSOLUTE_PATH, shape="an absolute path")
        for key in ("isolation_read_paths", "isolation_write_paths")}
    config = EngineConfig(
        kind=kind,
        command=s.string("command", default.command),
        model=s.optional_string("model"),
        max_turns=s.integer("max_turns", default.max_turns),
        wall_clock_seconds=s.integer("wall_clock_seconds", default.wall_clock_seconds),
        credential_env=credential_env,
        kill_grace_seconds=s.integer("kill_grace_seconds", default.kill_grace_seconds),
        api_url=api_url,
        api_key_env=api_key_env,
        max_tokens=s.integer("max_tokens", default.max_tokens),
        response_format=response_format,
        isolation=isolation,
        isolation_read_paths=sandbox_paths["isolation_read_paths"],
        isolation_write_paths=sandbox_paths["isolation_write_paths"],
    )
    if kind in ("anthropic", "openai_compatible") and not config.model:
        s.problem("model", f"is required for kind {kind}")
    if kind == "openai_compatible" and not config.api_url:
        s.problem("api_url", "is required for kind openai_compatible "
                             "(e.g. http://localhost:11434/v1)")
    s.finish()
    return config


def _dollars(s: _Section, key: str) -> float | None:
    """A positive, finite number of dollars, or None when absent or null."""
    value = s.get(key)
    if value is _MISSING or value is None:
        return None
    # bool subclasses int: `monthly_usd: true` must not become a one-dollar cap.
    if isinstance(value, bool) or not isinstance(value, int | float):
        s.problem(key, f"must be a number of dollars, got {_show(value)}")
        return None
    if not math.isfinite(value) or value <= 0:
        s.problem(key, f"must be a number of dollars greater than 0, got {_show(value)}")
        return None
    return float(value)


def _budget(top: _Section) -> BudgetConfig:
    s = top.section(
        "budget",
        required=True,
        hint="needs session_tokens, weekly_tokens and max_run_tokens: your own estimates",
    )
    mark = s.mark()
    config = BudgetConfig(
        enabled=s.boolean("enabled", True),
        session_tokens=s.integer(
            "session_tokens", None, hint="your estimate of the plan's rolling 5-hour limit"
        ),
        weekly_tokens=s.integer(
            "weekly_tokens", None, hint="your estimate of the plan's rolling weekly limit"
        ),
        max_run_tokens=s.integer("max_run_tokens", None, hint="the tokens reserved for each run"),
        reviewer_share_pct=s.integer("reviewer_share_pct", 40, maximum=100),
        per_actor_pct=s.integer("per_actor_pct", 100, maximum=100),
        max_reviews_per_pr=s.integer("max_reviews_per_pr", 5),
        monthly_usd=_dollars(s, "monthly_usd"),
    )
    s.finish()
    if s.failed_since(mark) or s.quiet:
        return config
    # Only meaningful once every number is valid. A run is admitted only while every
    # window has max_run_tokens left, so one larger than the smallest window could never
    # be admitted: an agent that silently reviews nothing, by arithmetic nobody did.
    smallest = min((config.session_limit, "session allowance", "session_tokens"),
                   (config.daily_limit, "daily allowance", "weekly_tokens ÷ 7"))
    if config.max_run_tokens > smallest[0]:
        s.problem(
            "max_run_tokens",
            f"{config.max_run_tokens} does not fit in the {smallest[1]} of {smallest[0]} "
            f"tokens ({smallest[2]} × {config.reviewer_share_pct}%); "
            "no run could ever be admitted",
        )
    elif config.max_run_tokens > smallest[0] * config.per_actor_pct // 100:
        # The same arithmetic, per person: a cap below one run admits nobody at all.
        s.problem(
            "per_actor_pct",
            f"{config.per_actor_pct}% of the {smallest[1]} is "
            f"{smallest[0] * config.per_actor_pct // 100} tokens, less than max_run_tokens "
            f"{config.max_run_tokens}; no one's run could ever be admitted",
        )
    run_usd = config.max_run_tokens * DEFAULT_USD_PER_MILLION_TOKENS / 1_000_000
    if config.monthly_usd is not None and config.monthly_usd < run_usd:
        s.problem(
            "monthly_usd",
            f"${config.monthly_usd:.2f} cannot pay for one run of max_run_tokens "
            f"{config.max_run_tokens} at the starting estimate of "
            f"${DEFAULT_USD_PER_MILLION_TOKENS} per million tokens (${run_usd:.2f})",
        )
    return config


def parse_config(data: object, environ: Mapping[str, str], base_dir: Path) -> Config:
    """Validate an already-parsed YAML document into a ``Config``.

    ``environ`` supplies the secrets not given as files; relative paths (secret files,
    ``store.path``) are resolved against ``base_dir``. Raises ``ConfigError`` listing every
    problem, each prefixed by its key path.
    """
    if data is None:
        raise ConfigError(["the config is empty"])
    if not isinstance(data, Mapping):
        raise ConfigError([f"the top level must be a mapping of sections, got {_show(data)}"])
    problems: list[str] = []
    top = _Section(problems, "", data)
    # Sections are read in the order DESIGN.md and docs/CONFIG.md list them, so problems
    # come out roughly in the order an operator reads the file.
    github, absent = _github(top, environ, base_dir)
    server = _server(top, environ, base_dir)
    store = top.section("store")
    store_path = store.string("path", StoreConfig.path)
    store.finish()
    poller = top.section("poller")
    interval = poller.integer("interval_seconds", PollerConfig.interval_seconds)
    poller.finish()
    triggers = _triggers(top)
    workers = top.section("workers")
    workers_config = WorkersConfig(
        count=workers.integer("count", WorkersConfig.count),
        lease_seconds=workers.integer("lease_seconds", WorkersConfig.lease_seconds),
    )
    workers.finish()
    engine = _engine(top)
    review = top.section("review")
    review_config = ReviewConfig(
        excluded_paths=review.strings("excluded_paths", ReviewConfig().excluded_paths),
        max_diff_lines=review.integer("max_diff_lines", ReviewConfig.max_diff_lines),
    )
    review.finish()
    publish = top.section("publish")
    publish_config = PublishConfig(
        dry_run=publish.boolean("dry_run", PublishConfig.dry_run),
        describe_updates_body=publish.boolean("describe_updates_body",
                                              PublishConfig.describe_updates_body),
    )
    publish.finish()
    retention = top.section("retention")
    retention_config = RetentionConfig(
        purge_after_close=retention.boolean("purge_after_close",
                                            RetentionConfig.purge_after_close),
        delay_hours=retention.integer("delay_hours", RetentionConfig.delay_hours, minimum=0),
    )
    retention.finish()
    budget = _budget(top)
    top.finish()
    if problems and problems != absent:
        raise ConfigError(problems)
    config = Config(
        github=github,
        triggers=triggers,
        budget=budget,
        server=server,
        store=StoreConfig(path=str(_resolve(base_dir, store_path))),
        poller=PollerConfig(interval_seconds=interval),
        workers=workers_config,
        engine=engine,
        review=review_config,
        publish=publish_config,
        retention=retention_config,
    )
    if problems:  # exactly the App's absent credentials: registration is what is left
        raise MissingCredentials(problems, config)
    return config


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but a key repeated in one mapping is recorded, not overwritten."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[object, object]:
    loader.flatten_mapping(node)
    seen: set[object] = set()
    for key_node, _ in node.value:
        if isinstance(key_node, yaml.ScalarNode):
            key = loader.construct_object(key_node)
            if key in seen:
                mark = key_node.start_mark
                loader.duplicates.append(
                    f"line {mark.line + 1}, column {mark.column + 1}: "
                    f"duplicate key {_show(key)} (only the last one would take effect)"
                )
            seen.add(key)
    return loader.construct_mapping(node)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str]) -> Config:
    """Read the YAML file at ``path`` and validate it (see ``parse_config``).

    Relative paths inside the file resolve against the file's own directory, so a config
    behaves the same whatever the working directory of the process reading it.
    """
    file = Path(path)
    try:
        text = _read_text(file)
    except ValueError as exc:
        raise ConfigError([f"config file: {exc}"]) from None
    loader = _StrictLoader(text)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc)]) from None
    finally:
        loader.dispose()
    if data is None:
        raise ConfigError([f"config file: {file} is empty"])
    # abspath, not resolve(): a config reached through a symlink (a Kubernetes secret mount)
    # keeps its paths relative to where the operator put it, not to the link's target.
    base_dir = Path(os.path.abspath(file)).parent
    try:
        config = parse_config(data, environ, base_dir)
    except ConfigError as exc:
        if exc.registration_needed and not loader.duplicates:
            raise
        raise ConfigError(loader.duplicates + exc.problems) from None
    if loader.duplicates:
        raise ConfigError(loader.duplicates)
    return config


def _yaml_problem(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {what}"
    return f"invalid YAML: {exc}"


# --- Describing ----------------------------------------------------------------------------


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def describe_config(config: Config) -> list[str]:
    """Human summary lines for ``check-config``: what the file means. Never a secret."""
    gh, srv, trig, budget = config.github, config.server, config.triggers, config.budget
    engine, review = config.engine, config.review
    rotation = " (plus one previous, during a rotation)" if len(gh.webhook_secrets) > 1 else ""
    share = budget.reviewer_share_pct
    # app_id 0 is MissingCredentials' placeholder: the App is not registered yet.
    registered = gh.app_id != 0
    return [
        f"github: app {gh.app_id} at {gh.api_url}" if registered else
        f"github: not registered yet (API {gh.api_url})",
        "repositories: "
        + (", ".join(gh.repositories) if gh.repositories else "every repository installed"),
        f"server: listening on {srv.host}:{srv.port}; webhook at {srv.webhook_path} with "
        + (f"1 secret{rotation}" if registered else "the secret registration creates")
        + f", body limit {srv.max_body_bytes} bytes"
        + (f"; public URL {srv.public_url}" if srv.public_url else ""),
        "GET /budget: "
        + ("needs the admin token" if srv.admin_token is not None else "open (no admin token)"),
        f"store: {config.store.path}",
        f"poller: every {config.poller.interval_seconds} s",
        f"triggers: mention {trig.mention}; auto review {_on(trig.auto_review)}; "
        f"on push {_on(trig.on_push)}",
        "allowed: associations "
        + (", ".join(trig.allowed_associations) or "none")
        + "; users "
        + (", ".join(trig.allowed_users) or "none"),
        f"workers: {config.workers.count}, lease {config.workers.lease_seconds} s",
        f"engine: {engine.kind} (command {engine.command}, model {engine.model or 'default'}, "
        f"max turns {engine.max_turns}, wall clock {engine.wall_clock_seconds} s)",
        f"review: max diff lines {review.max_diff_lines}; excluded paths "
        + (", ".join(review.excluded_paths) or "none"),
        f"publish: dry run {_on(config.publish.dry_run)}; describe "
        + ("into the pull request body" if config.publish.describe_updates_body
           else "as a comment"),
        f"retention: purge after close {_on(config.retention.purge_after_close)}"
        + (f", {config.retention.delay_hours} h after the close"
           if config.retention.purge_after_close and config.retention.delay_hours else ""),
        "budget: "
        + ("enabled" if budget.enabled else "DISABLED — a hard stop, nothing is admitted")
        + f"; reviewer share {share}%",
        f"budget window session (5 h): {budget.session_limit} tokens "
        f"({share}% of session_tokens {budget.session_tokens})",
        f"budget window daily (24 h): {budget.daily_limit} tokens "
        f"({share}% of weekly_tokens {budget.weekly_tokens}, ÷ 7)",
        f"budget window weekly (7 d): {budget.weekly_limit} tokens "
        f"({share}% of weekly_tokens {budget.weekly_tokens})",
        f"budget max_run_tokens: {budget.max_run_tokens} reserved per run",
        _describe_per_actor(budget),
        f"budget pacer: at most {budget.max_reviews_per_pr} run(s) per pull request "
        "per 24 h",
        "budget monthly dollars: "
        + ("no cap (monthly_usd not set)" if budget.monthly_usd is None else
           f"${budget.monthly_usd:.2f} per trailing 30 days"),
    ]


def _describe_per_actor(budget: BudgetConfig) -> str:
    pct = budget.per_actor_pct
    if pct == 100:
        return "budget per-person cap: off (per_actor_pct 100)"
    caps = ", ".join(f"{name} {limit * pct // 100}" for name, limit in (
        ("session", budget.session_limit), ("daily", budget.daily_limit),
        ("weekly", budget.weekly_limit)))
    return f"budget per-person cap: {pct}% of each window ({caps} tokens)"
