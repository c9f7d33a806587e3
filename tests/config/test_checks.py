"""The checks a key's kind cannot express, one value at a time and across a section's
keys: each returns why a value is refused, or None."""

from __future__ import annotations

from typing import Any

import pytest

from service.config.checks import (
    SECTION_CHECKS,
    api_root_problem,
    check_name_problem,
    engine_api_url_problem,
    env_name_problem,
    github_credentials,
    mention_problem,
    public_url_problem,
    store_url_problem,
    webhook_path_problem,
)


@pytest.mark.parametrize(("check", "value", "why"), [
    (check_name_problem, "pr-review-agent", None),
    (check_name_problem, "  ", "must not be empty"),
    (check_name_problem, "x" * 89, "must be one line of at most 88 characters"),
    (check_name_problem, "two\nlines", "must be one line of at most 88 characters"),
    (api_root_problem, "", None),
    (api_root_problem, "https://ghe.example.com/api/v3", None),
    (api_root_problem, "ftp://x", 'must be an http(s) URL without a query, got "ftp://x"'),
    (api_root_problem, "https://x/api?v=3", "must be an http(s) URL without a query"),
    (webhook_path_problem, "/github/webhook", None),
    (webhook_path_problem, "webhook", "must be a path starting with '/'"),
    (webhook_path_problem, "/hook?x=1", "must be a path starting with '/'"),
    (webhook_path_problem, "/healthz", "/healthz is a route the service already serves"),
    (public_url_problem, "https://reviews.example.com/agent", None),
    (public_url_problem, "reviews.example.com", "must be an http(s) URL with a host"),
    (public_url_problem, "https://x.example.com/?a=1", "must not have a query or a fragment"),
    (public_url_problem, "https://x.example.com/#", "must not have a query or a fragment"),
    (public_url_problem, "https://x.example.com/a b", "must not contain whitespace"),
    (store_url_problem, "postgresql://agent@db/reviews", None),
    (store_url_problem, "postgres://db/reviews", None),
    (store_url_problem, "mysql://db/reviews", "must be a postgresql:// URL"),
    (store_url_problem, "postgresql://agent:hunter2@db/reviews", "must not hold a password"),
    (mention_problem, "@claude", None),
    (mention_problem, "claude", "must be one word starting with '@'"),
    (mention_problem, "@", "must be one word starting with '@'"),
    (mention_problem, "@two words", "must be one word starting with '@'"),
    (engine_api_url_problem, "http://localhost:11434/v1", None),
    (engine_api_url_problem, "localhost:11434", "must be an http(s) URL"),
    (env_name_problem, "ANTHROPIC_API_KEY", None),
    (env_name_problem, "1BAD", "must be an environment variable name"),
])
def test_one_value(check: Any, value: str, why: str | None) -> None:
    found = check(value)
    assert found is None if why is None else (found is not None and found.startswith(why))


def test_a_password_in_a_store_url_is_never_echoed() -> None:
    why = store_url_problem("postgresql://agent:hunter2@db/reviews")
    assert why is not None and "hunter2" not in why


def test_the_engine_never_gets_a_github_credential() -> None:
    assert github_credentials(("ANTHROPIC_API_KEY", "GH_TOKEN", "github_token", "PATH")) == [
        ("[1]", "GH_TOKEN is a GitHub variable; the engine never gets GitHub credentials"),
        ("[2]", "github_token is a GitHub variable; the engine never gets GitHub credentials"),
    ]


def _problems(section: str, values: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    run, _ = SECTION_CHECKS[section]
    run(values, lambda key, why: found.append((key, why)))
    return found


def test_across_a_sections_keys() -> None:
    assert _problems("store", {"password": object(), "url": None}) == [
        ("password_file", "is for store.url; the SQLite file needs none")]
    assert _problems("store", {"password": object(), "url": "postgresql://db/x"}) == []
    assert _problems("engine", {"kind": "openai_compatible", "model": "", "api_url": ""}) == [
        ("model", "is required for kind openai_compatible"),
        ("api_url", "is required for kind openai_compatible (e.g. http://localhost:11434/v1)")]
    assert _problems("engine", {"kind": "claude_code", "model": "", "api_url": ""}) == []
    # The budget's checks need its keys valid first (they do arithmetic on them).
    assert SECTION_CHECKS["budget"][1] is True
