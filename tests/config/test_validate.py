"""The strict config loader: every class of bad config is refused with its key path."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from service.config.connections import GitHubConfig, ServerConfig
from service.config.errors import ConfigError
from service.config.posting import PublishConfig
from service.config.schema import (
    ASSOCIATIONS,
    ENGINE_KINDS,
    BudgetConfig,
    Config,
    EngineConfig,
    PollerConfig,
    RetentionConfig,
    ReviewConfig,
    TriggersConfig,
    WorkersConfig,
)
from service.config.secret import Secret
from service.config.strict_yaml import load_config
from service.config.validate import parse_config
from tests.config_documents import (
    ADMIN_TOKEN,
    PREVIOUS_SECRET,
    WEBHOOK_SECRET,
    full,
    minimal,
    problems_of,
    rsa_pem,
    secrets_dir,
    with_key,
)

__all__ = ["rsa_pem", "secrets_dir"]  # fixtures

# --- good configs ---------------------------------------------------------------------------


def test_minimal_config_loads_with_every_default(secrets_dir: Path, rsa_pem: str) -> None:
    config = parse_config(minimal(), {}, secrets_dir)

    assert config.github == GitHubConfig(
        app_id=123456,
        private_key=Secret(rsa_pem.strip()),
        webhook_secrets=(Secret(WEBHOOK_SECRET),),
    )
    assert config.triggers == TriggersConfig()
    assert config.budget == BudgetConfig(
        enabled=True, session_tokens=88000, weekly_tokens=1500000, max_run_tokens=30000
    )
    assert config.budget.reviewer_share_pct == 40
    assert config.server == ServerConfig()
    assert config.store.path == str(secrets_dir / "state.db")
    assert config.poller == PollerConfig()
    assert config.workers == WorkersConfig()
    assert config.engine == EngineConfig()
    assert config.review == ReviewConfig()
    assert config.publish == PublishConfig()
    assert config.retention == RetentionConfig()


def test_full_config_loads_every_value(secrets_dir: Path) -> None:
    (secrets_dir / "webhook.old").write_text(PREVIOUS_SECRET)
    (secrets_dir / "admin").write_text(ADMIN_TOKEN + "\n")

    config = parse_config(full(), {}, secrets_dir)

    assert config.github.app_id == 42
    assert config.github.api_url == "https://ghe.example.com/api/v3"
    assert config.github.repositories == ("acme/widgets", "acme/gadgets.js")
    assert [s.reveal() for s in config.github.webhook_secrets] == [WEBHOOK_SECRET, PREVIOUS_SECRET]
    assert config.server.host == "127.0.0.1"
    assert config.server.port == 9090
    assert config.server.webhook_path == "/hooks/github"
    assert config.server.admin_token == Secret(ADMIN_TOKEN)
    assert config.server.max_body_bytes == 1048576
    assert config.store.path == str(secrets_dir / "data" / "state.db")
    assert config.poller.interval_seconds == 60
    assert config.triggers == TriggersConfig(
        mention="@reviewbot",
        auto_review=False,
        on_push=True,
        allowed_associations=("OWNER", "CONTRIBUTOR"),
        allowed_users=("octocat", "hubot-2"),
    )
    assert config.workers == WorkersConfig(count=4, lease_seconds=1800)
    assert config.engine == EngineConfig(
        kind="anthropic",
        command="/usr/local/bin/claude",
        model="claude-sonnet-4",
        max_turns=50,
        wall_clock_seconds=600,
    )
    assert config.review == ReviewConfig(excluded_paths=("*.min.js",), max_diff_lines=2000)
    assert config.publish.dry_run is True
    assert config.retention.purge_after_close is False
    assert config.budget == BudgetConfig(
        enabled=False,
        session_tokens=100000,
        weekly_tokens=2000000,
        max_run_tokens=20000,
        reviewer_share_pct=25,
    )


def test_design_example_file_loads(secrets_dir: Path) -> None:
    """The YAML block of DESIGN.md, written as a file, is a valid config."""
    (secrets_dir / "config.yaml").write_text(
        """
github:
  app_id: 123456
  private_key_file: app.pem
  webhook_secret_file: webhook
  api_url: https://api.github.com
  repositories: []
server: {host: 0.0.0.0, port: 8080, webhook_path: /webhook, admin_token_file: null}
store: {path: state.db}
poller: {interval_seconds: 300}
triggers:
  mention: "@claude"
  auto_review: true
  on_push: false
  allowed_associations: [OWNER, MEMBER, COLLABORATOR]
  allowed_users: []
workers: {count: 2, lease_seconds: 1200}
engine: {kind: claude_code, command: claude, model: null, max_turns: 30, wall_clock_seconds: 900}
review: {excluded_paths: ["*.lock", "**/vendor/**"], max_diff_lines: 5000}
publish: {dry_run: false}
retention: {purge_after_close: true}
budget: {enabled: true, session_tokens: 88000, weekly_tokens: 1500000, max_run_tokens: 30000,
         reviewer_share_pct: 40}
"""
    )
    config = load_config(secrets_dir / "config.yaml", {})
    assert config == parse_config(minimal(), {}, secrets_dir)


def test_absolute_paths_are_kept(secrets_dir: Path) -> None:
    data = with_key("store.path", str(secrets_dir / "elsewhere" / "s.db"))
    data["github"]["private_key_file"] = str(secrets_dir / "app.pem")
    data["github"]["webhook_secret_file"] = str(secrets_dir / "webhook")
    config = parse_config(data, {}, Path("/nonexistent-base"))
    assert config.store.path == str(secrets_dir / "elsewhere" / "s.db")


def test_relative_paths_resolve_against_the_config_directory(
    secrets_dir: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    (secrets_dir / "config.yaml").write_text(yaml.safe_dump(minimal()))
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))

    config = load_config(os.path.relpath(secrets_dir / "config.yaml"), {})

    assert config.store.path == str(secrets_dir / "state.db")
    assert config.github.webhook_secrets == (Secret(WEBHOOK_SECRET),)


@pytest.mark.parametrize("kind", ENGINE_KINDS)
def test_every_engine_kind_is_accepted(secrets_dir: Path, kind: str) -> None:
    data = with_key("engine.kind", kind)
    data["engine"].update(model="some-model", api_url="http://127.0.0.1:11434/v1")
    assert parse_config(data, {}, secrets_dir).engine.kind == kind


def test_engine_keys_are_checked(secrets_dir: Path) -> None:
    data = with_key("engine.kind", "openai_compatible")
    data["engine"].update(credential_env=["CLAUDE_CODE_OAUTH_TOKEN", "GITHUB_TOKEN", "1X"],
                          api_key_env="not a name", response_format="xml", max_tokens=0)
    assert problems_of(data, secrets_dir) == [
        'engine.response_format: must be one of json_object, json_schema, none, got "xml"',
        'engine.credential_env[2]: must look like an environment variable name, got "1X"',
        "engine.credential_env[1]: GITHUB_TOKEN is a GitHub variable; the engine never gets "
        "GitHub credentials",
        'engine.api_key_env: must be an environment variable name, got "not a name"',
        "engine.max_tokens: must be at least 1, got 0",
        "engine.model: is required for kind openai_compatible",
        "engine.api_url: is required for kind openai_compatible (e.g. http://localhost:11434/v1)",
    ]


def test_engine_models_are_read_each_with_its_own_problems(secrets_dir: Path) -> None:
    data = with_key("engine.kind", "anthropic")
    data["engine"].update(model="claude-sonnet-4-5", models=[
        {"model": "claude-haiku-4-5", "max_prompt_tokens": 20000},
        {"model": "big", "context_tokens": 1000000}])
    models = parse_config(data, {}, secrets_dir).engine.models
    assert [(m.model, m.max_prompt_tokens, m.context_tokens) for m in models] == [
        ("claude-haiku-4-5", 20000, 0), ("big", 0, 1000000)]
    data["engine"]["models"] = [{"max_prompt_tokens": -1}, "haiku",
                                {"model": "x", "max_promt_tokens": 5}]
    assert problems_of(data, secrets_dir) == [
        "engine.models[0].model: required",
        "engine.models[0].max_prompt_tokens: must be at least 0, got -1",
        'engine.models[1]: must be a mapping, got "haiku"',
        "engine.models[2].max_promt_tokens: unknown key (did you mean max_prompt_tokens?)",
    ]
    data["engine"]["models"] = [{"model": f"m{i}"} for i in range(9)]
    assert problems_of(data, secrets_dir) == ["engine.models: must have at most 8 items, got 9"]


def test_every_github_association_is_accepted(secrets_dir: Path) -> None:
    data = with_key("triggers.allowed_associations", list(ASSOCIATIONS))
    config = parse_config(data, {}, secrets_dir)
    assert config.triggers.allowed_associations == ASSOCIATIONS
    assert set(ASSOCIATIONS) == {
        "OWNER",
        "MEMBER",
        "COLLABORATOR",
        "CONTRIBUTOR",
        "FIRST_TIME_CONTRIBUTOR",
        "FIRST_TIMER",
        "MANNEQUIN",
        "NONE",
    }


# --- unknown keys, types, ranges --------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "suggestion"),
    [
        ("budgt", "budget"),
        ("github.app_ids", "app_id"),
        ("github.private_key_path", "private_key_file"),
        ("server.admin_token", "admin_token_file"),
        ("store.pth", "path"),
        ("poller.interval", "interval_seconds"),
        ("triggers.allowed_association", "allowed_associations"),
        ("workers.counts", "count"),
        ("engine.max_turn", "max_turns"),
        ("review.exclude_paths", "excluded_paths"),
        ("publish.dryrun", "dry_run"),
        ("retention.purge_after_closed", "purge_after_close"),
        ("budget.weekly_token", "weekly_tokens"),
    ],
)
def test_unknown_key_at_every_level_suggests_the_nearest(
    secrets_dir: Path, path: str, suggestion: str
) -> None:
    problems = problems_of(with_key(path, 1), secrets_dir)
    assert problems == [f"{path}: unknown key (did you mean {suggestion}?)"]


def test_unknown_key_without_a_near_match_lists_the_valid_keys(secrets_dir: Path) -> None:
    assert problems_of(with_key("publish.zzz", 1), secrets_dir) == [
        "publish.zzz: unknown key (valid keys: describe_updates_body, dry_run, summary_comment)"
    ]


def test_non_string_key_is_unknown(secrets_dir: Path) -> None:
    data: dict[Any, Any] = minimal()
    data["workers"] = {7: "x"}
    assert problems_of(data, secrets_dir) == ["workers: unknown key 7"]


NUMERIC_KEYS = [
    "github.app_id",
    "server.port",
    "server.max_body_bytes",
    "poller.interval_seconds",
    "workers.count",
    "workers.lease_seconds",
    "engine.max_turns",
    "engine.wall_clock_seconds",
    "review.max_diff_lines",
    "budget.session_tokens",
    "budget.weekly_tokens",
    "budget.max_run_tokens",
    "budget.reviewer_share_pct",
]


@pytest.mark.parametrize("path", NUMERIC_KEYS)
@pytest.mark.parametrize("flag", [True, False])
def test_bool_is_refused_for_every_numeric_key(secrets_dir: Path, path: str, flag: bool) -> None:
    expected = f"{path}: must be an integer, got {'true' if flag else 'false'}"
    assert expected in problems_of(with_key(path, flag), secrets_dir)


@pytest.mark.parametrize("path", NUMERIC_KEYS)
@pytest.mark.parametrize(
    ("value", "shown"), [("100", '"100"'), (1.0, "1.0"), (None, "null"), ([1], "a list")]
)
def test_numeric_keys_refuse_other_types(
    secrets_dir: Path, path: str, value: object, shown: str
) -> None:
    assert f"{path}: must be an integer, got {shown}" in problems_of(
        with_key(path, value), secrets_dir
    )


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("github.app_id", 0, "must be at least 1, got 0"),
        ("server.port", 0, "must be between 1 and 65535, got 0"),
        ("server.port", 65536, "must be between 1 and 65535, got 65536"),
        ("server.max_body_bytes", 0, "must be at least 1, got 0"),
        ("poller.interval_seconds", 0, "must be at least 1, got 0"),
        ("workers.count", 0, "must be at least 1, got 0"),
        ("workers.lease_seconds", -5, "must be at least 1, got -5"),
        ("engine.max_turns", 0, "must be at least 1, got 0"),
        ("engine.wall_clock_seconds", 0, "must be at least 1, got 0"),
        ("review.max_diff_lines", 0, "must be at least 1, got 0"),
        ("budget.session_tokens", 0, "must be at least 1, got 0"),
        ("budget.weekly_tokens", -1, "must be at least 1, got -1"),
        ("budget.max_run_tokens", 0, "must be at least 1, got 0"),
        ("budget.reviewer_share_pct", 0, "must be between 1 and 100, got 0"),
        ("budget.reviewer_share_pct", 101, "must be between 1 and 100, got 101"),
    ],
)
def test_out_of_range(secrets_dir: Path, path: str, value: int, message: str) -> None:
    assert problems_of(with_key(path, value), secrets_dir) == [f"{path}: {message}"]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("triggers.auto_review", "yes please", 'must be true or false, got "yes please"'),
        ("triggers.on_push", 1, "must be true or false, got 1"),
        ("publish.dry_run", None, "must be true or false, got null"),
        ("retention.purge_after_close", 0, "must be true or false, got 0"),
        ("budget.enabled", "false", 'must be true or false, got "false"'),
        ("server.host", 8080, "must be a string, got 8080"),
        ("server.host", "", "must not be empty"),
        ("store.path", ["a"], "must be a string, got a list"),
        ("engine.command", "  ", "must not be empty"),
        ("engine.model", 4, "must be a string, got 4"),
        (
            "github.api_url",
            "ftp://example.com",
            'must be an http(s) URL without a query, got "ftp://example.com"',
        ),
        (
            "github.api_url",
            "api.github.com",
            'must be an http(s) URL without a query, got "api.github.com"',
        ),
        ("github.repositories", "acme/widgets", 'must be a list, got "acme/widgets"'),
        ("github.repositories", None, "must be a list, got null"),
        ("server.webhook_path", "webhook", "must be a path starting with '/', got \"webhook\""),
        ("server.webhook_path", "/we bhook", "must be a path starting with '/', got \"/we bhook\""),
        ("server.webhook_path", "/healthz", "/healthz is a route the service already serves"),
        ("triggers.mention", "claude", "must be one word starting with '@', got \"claude\""),
        ("triggers.mention", "@", "must be one word starting with '@', got \"@\""),
        (
            "engine.kind",
            "gpt",
            'must be one of claude_code, anthropic, openai_compatible, got "gpt"',
        ),
        ("github.private_key_file", 5, "must be a string, got 5"),
        ("triggers", None, "must be a mapping, got null"),
        ("server", [], "must be a mapping, got a list"),
    ],
)
def test_wrong_type_or_shape(secrets_dir: Path, path: str, value: object, message: str) -> None:
    assert problems_of(with_key(path, value), secrets_dir) == [f"{path}: {message}"]


@pytest.mark.parametrize(
    ("path", "items", "message"),
    [
        ("github.repositories", ["acme/ok", "nope"], 'must look like owner/name, got "nope"'),
        ("github.repositories", ["acme/ok", "a/b/c"], 'must look like owner/name, got "a/b/c"'),
        ("github.repositories", ["acme/ok", "-x/y"], 'must look like owner/name, got "-x/y"'),
        ("github.repositories", ["acme/ok", "acme/.."], 'must look like owner/name, got "acme/.."'),
        ("github.repositories", ["acme/ok", "ACME/OK"], '"ACME/OK" is listed more than once'),
        ("github.repositories", ["acme/ok", 3], "must be a non-empty string, got 3"),
        (
            "triggers.allowed_associations",
            ["OWNER", "member"],
            "must be one of " + ", ".join(ASSOCIATIONS) + ', got "member" (did you mean MEMBER?)',
        ),
        (
            "triggers.allowed_associations",
            ["OWNER", "ADMIN"],
            "must be one of " + ", ".join(ASSOCIATIONS) + ', got "ADMIN"',
        ),
        ("triggers.allowed_associations", ["OWNER", "OWNER"], '"OWNER" is listed more than once'),
        (
            "triggers.allowed_users",
            ["octocat", "bad user"],
            'must look like a GitHub login, got "bad user"',
        ),
        ("review.excluded_paths", ["*.lock", ""], 'must be a non-empty string, got ""'),
    ],
)
def test_bad_list_items_name_their_index(
    secrets_dir: Path, path: str, items: list[object], message: str
) -> None:
    assert problems_of(with_key(path, items), secrets_dir) == [f"{path}[1]: {message}"]


# --- required sections and keys ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            "github",
            "github: required section is missing (needs app_id, and the private key and webhook "
            "secret from *_file keys or the environment)",
        ),
        (
            "triggers",
            "triggers: required section is missing (write `triggers: {}` to take every default)",
        ),
        (
            "budget",
            "budget: required section is missing (needs session_tokens, weekly_tokens and "
            "max_run_tokens: your own estimates)",
        ),
    ],
)
def test_missing_required_section_is_one_problem(
    secrets_dir: Path, section: str, message: str
) -> None:
    data = minimal()
    del data[section]
    assert problems_of(data, secrets_dir) == [message]


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("key", ["session_tokens", "weekly_tokens", "max_run_tokens"])
def test_budget_counts_are_required_even_when_disabled(
    secrets_dir: Path, key: str, enabled: bool
) -> None:
    data = with_key("budget.enabled", enabled)
    del data["budget"][key]
    problems = problems_of(data, secrets_dir)
    assert len(problems) == 1
    assert problems[0].startswith(f"budget.{key}: required (")


def test_app_id_is_required(secrets_dir: Path) -> None:
    data = minimal()
    del data["github"]["app_id"]
    assert problems_of(data, secrets_dir) == [
        "github.app_id: required (the numeric App ID from the App's settings page)"
    ]


# --- budget arithmetic --------------------------------------------------------------------------


def test_max_run_tokens_must_fit_in_the_session_allowance(secrets_dir: Path) -> None:
    assert parse_config(with_key("budget.max_run_tokens", 35200), {}, secrets_dir)
    problems = problems_of(with_key("budget.max_run_tokens", 35201), secrets_dir)
    assert problems == [
        "budget.max_run_tokens: 35201 does not fit in the session allowance of 35200 tokens "
        "(session_tokens × 40%); no run could ever be admitted"
    ]


def test_max_run_tokens_must_fit_in_the_daily_allowance(secrets_dir: Path) -> None:
    data = with_key("budget.session_tokens", 10_000_000)
    data["budget"]["max_run_tokens"] = 85714  # type: ignore[index]
    assert parse_config(data, {}, secrets_dir)
    data["budget"]["max_run_tokens"] = 85715  # type: ignore[index]
    assert problems_of(data, secrets_dir) == [
        "budget.max_run_tokens: 85715 does not fit in the daily allowance of 85714 tokens "
        "(weekly_tokens ÷ 7 × 40%); no run could ever be admitted"
    ]


def test_cross_key_check_waits_for_valid_numbers(secrets_dir: Path) -> None:
    """A bad weekly_tokens is reported once, not again as a daily-allowance misfit."""
    assert problems_of(with_key("budget.weekly_tokens", 0), secrets_dir) == [
        "budget.weekly_tokens: must be at least 1, got 0"
    ]


def test_disabled_budget_still_checks_its_numbers(secrets_dir: Path) -> None:
    data = with_key("budget.enabled", False)
    data["budget"]["max_run_tokens"] = 10**9
    assert problems_of(data, secrets_dir)[0].startswith("budget.max_run_tokens: 1000000000 does")


# --- file-level problems ------------------------------------------------------------------------


def test_missing_config_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "absent.yaml", {})
    assert caught.value.problems == [
        f"config file: cannot read {tmp_path / 'absent.yaml'}: no such file"
    ]


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_config_file(tmp_path: Path, text: str) -> None:
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "c.yaml", {})
    assert caught.value.problems == [f"config file: {tmp_path / 'c.yaml'} is empty"]


@pytest.mark.parametrize(
    ("text", "shown"), [("- a\n- b\n", "a list"), ("just words\n", '"just words"'), ("5\n", "5")]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, shown: str) -> None:
    (tmp_path / "c.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "c.yaml", {})
    assert caught.value.problems == [f"the top level must be a mapping of sections, got {shown}"]


def test_invalid_yaml_reports_line_and_column(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("github:\n  app_id: 1\n  bad: [unclosed\ntriggers: {}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "c.yaml", {})
    (problem,) = caught.value.problems
    assert problem.startswith("invalid YAML at line 4, column 9: ")


def test_two_documents_are_refused(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("a: 1\n---\nb: 2\n")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "c.yaml", {})
    assert caught.value.problems[0].startswith("invalid YAML at line 2, column 1: ")


def test_duplicate_keys_are_refused_with_the_rest(secrets_dir: Path) -> None:
    first = yaml.safe_dump(minimal())
    (secrets_dir / "c.yaml").write_text(first + "budget: {session_tokens: 1}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(secrets_dir / "c.yaml", {})
    line = first.count("\n") + 1
    assert caught.value.problems == [
        f'line {line}, column 1: duplicate key "budget" (only the last one would take effect)',
        f"line {line}: budget.weekly_tokens: required (your estimate of the plan's rolling "
        "weekly limit)",
        f"line {line}: budget.max_run_tokens: required (the tokens reserved for each run)",
    ]


def test_duplicate_key_alone_is_still_an_error(secrets_dir: Path) -> None:
    text = yaml.safe_dump(minimal()).replace("app_id: 123456\n", "app_id: 1\n  app_id: 2\n")
    (secrets_dir / "c.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(secrets_dir / "c.yaml", {})
    (problem,) = caught.value.problems
    assert 'duplicate key "app_id"' in problem


def test_every_problem_is_reported_together(secrets_dir: Path) -> None:
    data = copy.deepcopy(full())
    data["github"]["app_id"] = True
    data["github"]["previous_webhook_secret_file"] = "missing-old"
    data["server"]["port"] = 70000
    data["server"]["admin_token"] = "x"
    data["triggers"]["allowed_associations"] = ["owner"]
    data["engine"]["kind"] = "gpt"
    data["budget"]["weekly_token"] = data["budget"].pop("weekly_tokens")
    data["extra"] = {}
    problems = problems_of(data, secrets_dir)
    assert problems == [
        "github.app_id: must be an integer, got true",
        f"github.previous_webhook_secret_file: cannot read {secrets_dir / 'missing-old'}: "
        "no such file",
        "server.port: must be between 1 and 65535, got 70000",
        f"server.admin_token_file: cannot read {secrets_dir / 'admin'}: no such file",
        "server.admin_token: unknown key (did you mean admin_token_file?)",
        "triggers.allowed_associations[0]: must be one of "
        + ", ".join(ASSOCIATIONS)
        + ', got "owner" (did you mean OWNER?)',
        'engine.kind: must be one of claude_code, anthropic, openai_compatible, got "gpt"',
        "budget.weekly_tokens: required (your estimate of the plan's rolling weekly limit)",
        "budget.weekly_token: unknown key (did you mean weekly_tokens?)",
        "extra: unknown key (valid keys: ask, budget, checks, engine, github, poller, publish, "
        "repository_config, "
        "retention, review, server, store, triggers, workers)",
    ]
    assert str(ConfigError(problems)) == "\n".join(problems)


def test_config_is_frozen(secrets_dir: Path) -> None:
    config = parse_config(minimal(), {}, secrets_dir)
    assert isinstance(config, Config)
    with pytest.raises(AttributeError):
        config.budget.enabled = False  # type: ignore[misc]

