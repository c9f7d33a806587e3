"""Typed, strict configuration.

The whole schema is a tree of frozen dataclasses. ``load_config(path, environ)`` reads a
YAML file and the environment (both passed in, so tests and reloads need no globals)
and returns a ``Config`` or raises ``ConfigError`` listing *every* problem found.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class Secret:
    """A string that never shows itself in a repr, a log line or an exception."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class GitHubConfig:
    app_id: int
    private_key: Secret          # PEM, from private_key_file or env GITHUB_APP_PRIVATE_KEY
    webhook_secrets: tuple[Secret, ...]  # first is current; more accepted during a rotation
    api_url: str = "https://api.github.com"
    repositories: tuple[str, ...] = ()   # "owner/name"; empty = every installed repository


@dataclass(frozen=True)
class ServerConfig:
    host: str = "0.0.0.0"  # noqa: S104 - a webhook receiver has to listen beyond loopback
    port: int = 8080
    webhook_path: str = "/webhook"
    admin_token: Secret | None = None   # from admin_token_file; protects GET /budget
    max_body_bytes: int = 25 * 1024 * 1024


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
    kind: str = "claude_code"          # claude_code | anthropic | openai_compatible
    command: str = "claude"
    model: str | None = None
    max_turns: int = 30
    wall_clock_seconds: int = 900


@dataclass(frozen=True)
class ReviewConfig:
    excluded_paths: tuple[str, ...] = ("*.lock", "**/vendor/**")
    max_diff_lines: int = 5000


@dataclass(frozen=True)
class PublishConfig:
    dry_run: bool = False


@dataclass(frozen=True)
class RetentionConfig:
    purge_after_close: bool = True


@dataclass(frozen=True)
class BudgetConfig:
    """The spending rails. ``enabled: false`` is an emergency brake: nothing is admitted.

    Limits are derived once, here, and floored to whole tokens after the share (and the
    seventh, for the daily window) are applied; the share never appears elsewhere.
    """

    enabled: bool
    session_tokens: int
    weekly_tokens: int
    max_run_tokens: int
    reviewer_share_pct: int = 40

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
    """Every problem found in one config file, each prefixed by its key path."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))
