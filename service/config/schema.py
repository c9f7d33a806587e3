"""The config's schema: one frozen dataclass per section, each key declared on its field.

The sections that connect the App to the world (``github``, ``server``, ``store``) are
declared in connections.py, those of what it posts (``publish``, ``checks``, ``ask``) in
posting.py; the rest, and the ``Config`` that holds them all, here.

A declaration (``service.config.declare.key``) carries the key's kind, default, bounds
and the one-line doc that docs/CONFIG.md's key tables are rendered from. Sections are
keyword-only, so a field's place is the order the keys are read and documented in.
Checks a kind cannot express live in ``checks.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final, Literal, get_args

from service.config.checks import (
    engine_api_url_problem,
    env_name_problem,
    github_credentials,
    mention_problem,
)
from service.config.connections import REPOSITORY_NAME, GitHubConfig, ServerConfig, StoreConfig
from service.config.declare import Section, key, section
from service.config.posting import AskConfig, ChecksConfig, PublishConfig
from service.config.repository.keys import KEYS as REPO_KEYS
from service.model.severity import SEVERITIES

#: How the Claude Code engine is confined (``engine.isolation``); ``engine.sandbox`` does it.
Isolation = Literal["landlock", "none"]
ISOLATIONS: Final = get_args(Isolation)

ENGINE_KINDS: Final = ("claude_code", "anthropic", "openai_compatible")
ENGINE_RESPONSE_FORMATS: Final = ("json_object", "json_schema", "none")
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

#: The keys a repository's own file has (``repository_config.allow``).
REPO_KEY_NAMES: Final = tuple(k.name for k in REPO_KEYS)
_LOGIN_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}")
_ABSOLUTE_PATH: Final = re.compile(r"/.*")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, kw_only=True)
class PollerConfig:
    interval_seconds: int = key("int",
        "Seconds between poll cycles. The poller is the source of truth; webhooks only make the "
        "agent react sooner.",
        300)
    delivery_log_seconds: int = key("int",
        "Seconds between reads of the App's webhook delivery log: a delivery that failed "
        "(the App was down, or GitHub could not reach it) is asked for again, or fetched "
        "from the log, within about this long of the App's return "
        "([POLLER](POLLER.md#the-delivery-log)). `0`: not read.",
        60, minimum=0)


@dataclass(frozen=True, kw_only=True)
class TriggersConfig:
    mention: str = key("str",
        "The word that addresses the agent in a comment (`@claude review`, `@claude describe`, "
        "`@claude ask`). "
        "One word starting with `@`, no spaces.",
        '@claude', check=mention_problem)
    auto_review: bool = key("bool",
        "Review pull requests when opened, reopened or marked ready for review (drafts are "
        "skipped).",
        True)
    on_push: bool = key("bool",
        "Re-review incrementally when new commits are pushed (`synchronize`).",
        False)
    allowed_associations: tuple[str, ...] = key("strs",
        "Comment authors whose `author_association` is one of these may trigger the agent. "
        "Values must be GitHub's names: `OWNER`, `MEMBER`, `COLLABORATOR`, `CONTRIBUTOR`, "
        "`FIRST_TIME_CONTRIBUTOR`, `FIRST_TIMER`, `MANNEQUIN`, `NONE`.",
        ("OWNER", "MEMBER", "COLLABORATOR"), allowed=ASSOCIATIONS)
    allowed_users: tuple[str, ...] = key("strs",
        "GitHub logins allowed regardless of association.",
        (), pattern=_LOGIN_RE, shape='a GitHub login', fold_case=True)


@dataclass(frozen=True, kw_only=True)
class WorkersConfig:
    count: int = key("int", "Reviews run at once.", 2)
    lease_seconds: int = key("int",
        "How long a claimed job is held. A worker that dies leaves its lease to expire and the "
        "job becomes claimable again. Keep it above `engine.wall_clock_seconds`.",
        1200)


MAX_MODEL_ROUTES: Final = 8  # ``engine.models``: each is priced before every run


@dataclass(frozen=True, kw_only=True)
class ModelRoute:
    """One of ``engine.models``: another model of the engine (``review.routing``)."""

    model: str = key("str", "The model's name, as `engine.model` would give it.")
    max_prompt_tokens: int = key("int",
        "The largest pull request given to this model: its whole diff in one call, counted "
        "as this model counts it. `0`: no bound; the model then takes what the default "
        "model's window cannot hold whole.",
        0, minimum=0)
    context_tokens: int = key("int", "Its context window, as `engine.context_tokens` (`0`: "
                              "read it from the server or the published window).", 0, minimum=0)


@dataclass(frozen=True, kw_only=True)
class EngineConfig:
    kind: str = key("str",
        "One of `claude_code`, `anthropic`, `openai_compatible`.",
        'claude_code', allowed=ENGINE_KINDS)
    response_format: str = key("str",
        "`openai_compatible`: `json_object`, `json_schema` or `none`, as the server supports.",
        'json_object', allowed=ENGINE_RESPONSE_FORMATS)
    credential_env: tuple[str, ...] = key("strs",
        "The environment variables passed to `claude`, which gets a scrubbed environment and "
        "nothing else. A `GH_*` or `GITHUB_*` name is refused: the engine never sees a GitHub "
        "credential. Add `ANTHROPIC_API_KEY` only if you mean the CLI to bill that key. The "
        "CLI's HOME is new for every run, so a login saved by `claude login` is not used: give "
        "the token from `claude setup-token`.",
        ("CLAUDE_CODE_OAUTH_TOKEN",), pattern=_ENV_NAME, shape="an environment variable name",
        check=github_credentials)
    api_url: str | None = key("str?",
        "`anthropic`: the Messages API's root, without `/v1` (default "
        "`https://api.anthropic.com`). `openai_compatible`: required, with `/v1`, e.g. "
        "`http://localhost:11434/v1`.",
        None, check=engine_api_url_problem)
    api_key_env: str | None = key("str?",
        "The variable holding the API key (`anthropic` defaults to `ANTHROPIC_API_KEY`; a local "
        "`openai_compatible` server may need none).",
        None, check=env_name_problem)
    isolation: str = key("str",
        "`claude_code`: each review is confined by the kernel to its worktree, a throwaway HOME "
        "and the CLI's own install, so a persuaded model cannot read the App's key, this config "
        "or the store "
        "([SECURITY](SECURITY.md#a-pull-request-tells-the-model-to-read-the-hosts-files)). The "
        "workers refuse to start when that cannot be proven on this host. `none` turns it off "
        "(logged as a warning).",
        'landlock', allowed=ISOLATIONS)
    isolation_read_paths: tuple[str, ...] = key("strs",
        "Absolute paths the confined CLI may also read (a wrapper script's files). A path that "
        "holds a secret, the config or the store is refused at start.",
        (), pattern=_ABSOLUTE_PATH, shape='an absolute path')
    isolation_write_paths: tuple[str, ...] = key("strs",
        "Absolute paths the confined CLI may also write.",
        (), pattern=_ABSOLUTE_PATH, shape='an absolute path')
    command: str = key("str", "The executable for `claude_code`.", 'claude')
    model: str | None = key("str?",
        "Model name; `null` lets `claude_code` choose its default. Required for `anthropic` and "
        "`openai_compatible`.",
        None)
    max_turns: int = key("int", "Cap on agentic turns per review.", 30)
    wall_clock_seconds: int = key("int",
        "A review running longer is stopped (its whole process group is killed).",
        900)
    kill_grace_seconds: int = key("int",
        "After the wall clock, SIGTERM, then SIGKILL this many seconds later.",
        5)
    max_tokens: int = key("int",
        "The longest answer asked of the model (`anthropic`, `openai_compatible`); each call "
        "also gets no more than what is left of `max_run_tokens` after its input, so a run "
        "never spends more than it reserved "
        "([ENGINE](ENGINE.md#the-http-engines-the-reservation-is-a-cap)).",
        8192)
    context_tokens: int = key("int",
        "The model's context window in tokens: every call's prompt plus its answer fits in "
        "it, and a pull request too large for one call is reviewed in parts "
        "([ENGINE](ENGINE.md#the-models-window)). `0`: read it from the server "
        "(`openai_compatible`: vLLM, llama.cpp, Ollama) or the published window of the "
        "model; `doctor` shows which.",
        0, minimum=0)
    models: tuple[ModelRoute, ...] = key("items",
        "Other models of the same engine, chosen by the size of the pull request "
        "([ENGINE](ENGINE.md#routing-by-size)). A model with `max_prompt_tokens` takes the "
        "pull requests up to that size that fit its window (a cheap model for small ones); "
        "`engine.model` takes the next; a model without it, those the default's window "
        "cannot hold in one call (a larger window, fewer parts). Each is priced as it "
        f"counts, before the run. At most {MAX_MODEL_ROUTES}.",
        (), item=ModelRoute, maximum=MAX_MODEL_ROUTES)


@dataclass(frozen=True, kw_only=True)
class ReviewConfig:
    excluded_paths: tuple[str, ...] = key("strs",
        "Glob patterns of files left out of the diff the engine sees.",
        ("*.lock", "**/vendor/**"))
    max_diff_lines: int = key("int",
        "Cap on the size, in lines, of a diff sent for review.",
        5000)
    min_severity: str = key("str",
        "The least serious finding posted: `critical`, `major`, `minor` or `nit`. Those below "
        "are counted in the review body (\"4 more minor notes not shown\"), never silently "
        "dropped. A repository's `.github/pr-review-agent.yml` may set its own.",
        "nit", allowed=SEVERITIES)
    partial_conclusion: str = key("str",
        "The check run's conclusion for a review that did not read everything it was to "
        "(files over the model's window or the run's tokens, shed to fit, or a part that "
        "failed; files `excluded_paths` leaves out do not count): `neutral`, `success` or "
        "`failure`. Its title names the coverage either way (\"Reviewed 42 of 50 files\").",
        "neutral", allowed=("neutral", "success", "failure"))
    max_findings: int = key("int",
        "At most this many findings posted per review, the most serious first (1–100); the "
        "rest are counted in the review body. A repository's file may set its own.",
        100, maximum=100)
    decline_phrases: tuple[str, ...] = key("strs",
        "A reply on one of the App's findings that starts with one of these (any case), "
        "from the pull request's author or a person allowed to ask, declines it: it is not "
        "raised again on that pull request. A 👎 on the finding, or its thread resolved by "
        "a person while its code is unchanged, declines it too.",
        ("won't fix", "wont fix", "wontfix", "not a bug", "false positive", "by design"))


@dataclass(frozen=True, kw_only=True)
class RepositoryConfigConfig:
    """What a repository's own ``.github/pr-review-agent.yml`` may change
    (docs/REPOSITORY-CONFIG.md)."""

    allow: tuple[str, ...] = key("strs",
        "The keys a repository's `.github/pr-review-agent.yml` (and its organisation's) may "
        "set; a key left out is ignored where a file sets it, and the check run says so. `[]` "
        "reads no file at all.",
        REPO_KEY_NAMES, allowed=REPO_KEY_NAMES)
    refresh_minutes: int = key("int",
        "How old the last read of a repository's file may be before the poller reads it again "
        "(with a conditional request: an unchanged file costs nothing against the rate limit, "
        "a missing one costs a request). A review always reads it afresh.",
        10)


@dataclass(frozen=True, kw_only=True)
class RetentionConfig:
    """Purging review content from ``runs`` once a pull request closes or merges."""

    purge_after_close: bool = key("bool",
        "Delete stored review content once a pull request is closed or merged. The token ledger "
        "is never pruned.",
        True)
    delay_hours: int = key("int",
        "How long after the close the content is purged (an integer ≥ 0).",
        0, minimum=0)


@dataclass(frozen=True, kw_only=True)
class BudgetConfig:
    """The spending rails. ``enabled: false`` is an emergency brake: nothing is admitted.

    Limits are derived once, here, and floored to whole tokens after the share (and the
    seventh, for the daily window) are applied; the share never appears elsewhere.

    The first five fields are the *shared* policy (one ``budget_policy`` row that every
    process on a store obeys); ``per_actor_pct`` (100 = no per-person cap),
    ``max_reviews_per_pr`` (runs per pull request per 24 h) and ``monthly_usd`` (None =
    no dollar cap) are this process's own.
    """

    enabled: bool = key("bool",
        "`false` is a **hard stop: nothing is admitted**. It is the emergency brake, not "
        "\"unlimited\".",
        True)
    session_tokens: int = key("int",
        "Your estimate of the plan's rolling 5-hour token limit.",
        hint="your estimate of the plan's rolling 5-hour limit")
    weekly_tokens: int = key("int",
        "Your estimate of the plan's rolling weekly token limit.",
        hint="your estimate of the plan's rolling weekly limit")
    max_run_tokens: int = key("int",
        "Tokens reserved for each run before it starts. Must fit in the smallest window "
        "(session and daily limits).",
        hint='the tokens reserved for each run')
    reviewer_share_pct: int = key("int",
        "The share of each plan window the agent may use, 1–100. The rest is headroom for "
        "people using the same plan.",
        40, maximum=100)
    per_actor_pct: int = key("int",
        "The share of each window one person's runs may take, 1–100: a `pr_opened` is charged "
        "to the pull request's author, a mention to the comment's author. A person at their cap "
        "waits while other people's work is admitted. Must leave room for one run in the "
        "smallest window.",
        100, maximum=100, note='(no cap)')
    per_installation_pct: int = key("int",
        "The share of each window one installation's runs may take, 1–100: an App installed by "
        "several organisations (or accounts) cannot let one of them spend the whole allowance. "
        "An installation at its cap waits while the others' work is admitted. Must leave room "
        "for one run in the smallest window.",
        100, maximum=100, note='(no cap)')
    repository_reviews_per_day: tuple[tuple[str, int], ...] = key("counts",
        "Caps on single repositories: `{\"owner/name\": N}` allows at most N runs of that "
        "repository in any 24 hours (counted like `max_reviews_per_pr`). A repository at its "
        "cap waits; the others go on.",
        (), pattern=REPOSITORY_NAME, shape='owner/name', fold_case=True)
    max_reviews_per_pr: int = key("int",
        "At most this many runs per pull request in any 24 hours (integer ≥ 1). Runs settled at "
        "zero as refused, closed or engine-unavailable do not count.",
        5)
    monthly_usd: float | None = key("usd",
        "A cap, in dollars, on what runs cost over a trailing 30 days, from the cost the engine "
        "reports (Claude Code's headless runs draw on a monthly dollar credit). Runs that "
        "report no cost are charged at the estimated rate. Must pay for one run of "
        "`max_run_tokens` at the starting estimate of $15 per million tokens.",
        None, note='(no cap)')

    @property
    def session_limit(self) -> int:
        return self.session_tokens * self.reviewer_share_pct // 100

    @property
    def weekly_limit(self) -> int:
        return self.weekly_tokens * self.reviewer_share_pct // 100

    @property
    def daily_limit(self) -> int:
        return self.weekly_tokens * self.reviewer_share_pct // 100 // 7


@dataclass(frozen=True, kw_only=True)
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
    checks: ChecksConfig = field(default_factory=ChecksConfig)
    repository_config: RepositoryConfigConfig = field(default_factory=RepositoryConfigConfig)
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    ask: AskConfig = field(default_factory=AskConfig)


#: Every section, in the order they are read and documented.
SECTIONS: Final[tuple[Section, ...]] = (
    section("github", GitHubConfig, required=True, title="(required section)",
            hint="needs app_id, and the private key and webhook secret from *_file keys "
                 "or the environment"),
    section("server", ServerConfig),
    section("store", StoreConfig),
    section("poller", PollerConfig),
    section("triggers", TriggersConfig, required=True,
            title="(required section; `{}` takes every default)",
            hint="write `triggers: {}` to take every default"),
    section("workers", WorkersConfig),
    section("engine", EngineConfig),
    section("review", ReviewConfig),
    section("publish", PublishConfig),
    section("checks", ChecksConfig),
    section("ask", AskConfig),
    section("repository_config", RepositoryConfigConfig),
    section("retention", RetentionConfig),
    section("budget", BudgetConfig, required=True, title="(required section)",
            hint="needs session_tokens, weekly_tokens and max_run_tokens: your own estimates"),
)
