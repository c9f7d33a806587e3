"""A config whose one missing step is registering the App, told apart from a broken one.

``MissingCredentials`` (``ConfigError.registration_needed``) is raised only when every
problem is the App's absent credentials; ``check-config`` then says registration is the
one step left (exit 3) instead of listing errors. Also ``server.public_url``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.app.setup.files import TEMPLATE_BUDGET, new_config_text, write_admin_token
from service.cli.main import main
from service.config.describe import describe_config
from service.config.errors import ConfigError, MissingCredentials
from service.config.strict_yaml import load_config
from service.config.validate import parse_config
from tests.config_documents import minimal

REST: dict[str, Any] = {
    "triggers": {},
    "budget": {"session_tokens": 88000, "weekly_tokens": 1500000, "max_run_tokens": 30000},
}


@pytest.fixture(autouse=True)
def _no_secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_APP_PRIVATE_KEY", "GITHUB_WEBHOOK_SECRET",
                 "GITHUB_WEBHOOK_SECRET_PREVIOUS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def error_of(data: object, base_dir: Path, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ or {}, base_dir)
    return caught.value


@pytest.mark.parametrize("github", [
    None,                                                     # no section at all
    {},                                                       # an empty one
    {"api_url": "https://ghe.example.com/api/v3"},            # only where GitHub is
    {"private_key_file": "secrets/app.pem",                   # paths of files not there yet
     "webhook_secret_file": "secrets/hook", "repositories": ["acme/widgets"]},
    {"private_key_file": None},                               # null is "not given"
])
def test_an_unregistered_app_is_missing_credentials(tmp_path: Path,
                                                    github: dict[str, Any] | None) -> None:
    data = copy.deepcopy(REST)
    if github is not None:
        data["github"] = github
    exc = error_of(data, tmp_path)
    assert isinstance(exc, MissingCredentials)
    assert exc.registration_needed is True
    # The problems are the loader's usual words; the flag is what is new.
    assert all(p.startswith("github") for p in exc.problems)
    # Everything else in the file was parsed: registration needs the API and the server.
    pending = exc.config
    assert pending.github.app_id == 0 and pending.github.webhook_secrets == ()
    assert pending.budget.session_tokens == 88000
    assert pending.store.path == str(tmp_path / "state.db")
    if github and "api_url" in github:
        assert pending.github.api_url == "https://ghe.example.com/api/v3"
    if github and "repositories" in github:
        assert pending.github.repositories == ("acme/widgets",)


@pytest.mark.parametrize(("github", "environ", "expected"), [
    # An app_id says the App was registered: a missing key is a lost secret, not a first run.
    ({"app_id": 7}, {}, "github.private_key_file: required"),
    ({"app_id": 7, "private_key_file": "gone.pem", "webhook_secret_file": "gone"}, {},
     "github.private_key_file: cannot read"),
    # Credentials given by the environment mean someone meant to configure them by hand.
    ({}, {"GITHUB_WEBHOOK_SECRET": "s"}, "github.app_id: required"),
    (None, {"GITHUB_APP_PRIVATE_KEY": "k"}, "github: required section is missing"),
    # A malformed value is a mistake to fix, not an absence.
    ({"private_key_file": 5}, {}, "github.private_key_file: must be a string"),
    ({"api_url": "ftp://x"}, {}, "github.api_url: must be an http(s) URL"),
    ({"app_ids": 7}, {}, "github.app_ids: unknown key"),
])
def test_a_broken_github_section_is_an_ordinary_error(
        tmp_path: Path, github: dict[str, Any] | None, environ: dict[str, str],
        expected: str) -> None:
    data = copy.deepcopy(REST)
    if github is not None:
        data["github"] = github
    exc = error_of(data, tmp_path, environ)
    assert not isinstance(exc, MissingCredentials)
    assert exc.registration_needed is False
    assert any(p.startswith(expected) for p in exc.problems), exc.problems


def test_a_key_file_that_exists_without_app_id_is_not_a_first_run(tmp_path: Path,
                                                                  pem: bytes) -> None:
    (tmp_path / "app.pem").write_bytes(pem)
    data = {**copy.deepcopy(REST), "github": {"private_key_file": "app.pem"}}
    exc = error_of(data, tmp_path)
    assert exc.registration_needed is False
    assert exc.problems[0] == ("github.app_id: required (the numeric App ID from the App's "
                               "settings page)")


def test_other_problems_keep_the_whole_list(tmp_path: Path) -> None:
    data = copy.deepcopy(REST)
    data["budget"]["weekly_tokens"] = True
    exc = error_of(data, tmp_path)
    assert exc.registration_needed is False
    assert exc.problems == [
        "github: required section is missing (needs app_id, and the private key and webhook "
        "secret from *_file keys or the environment)",
        "budget.weekly_tokens: must be an integer, got true",
    ]


def test_a_registered_config_still_loads(tmp_path: Path, pem: bytes) -> None:
    (tmp_path / "app.pem").write_bytes(pem)
    (tmp_path / "hook").write_text("hook-secret\n")
    data = minimal()
    data["github"].update(private_key_file="app.pem", webhook_secret_file="hook")
    assert parse_config(data, {}, tmp_path).github.app_id == data["github"]["app_id"]


def test_duplicate_keys_turn_missing_credentials_into_an_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("triggers: {}\ntriggers: {}\nbudget: {session_tokens: 88000, "
                    "weekly_tokens: 1500000, max_run_tokens: 30000}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path, {})
    assert caught.value.registration_needed is False
    assert caught.value.problems[0].startswith("line 2, column 1: duplicate key")


def test_the_template_is_valid_but_for_registration(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    from datetime import UTC, datetime
    write_admin_token(path)
    path.write_text(new_config_text(path, datetime(2026, 5, 1, tzinfo=UTC)))
    with pytest.raises(MissingCredentials) as caught:
        load_config(path, {})
    budget = caught.value.config.budget
    assert budget == TEMPLATE_BUDGET
    # The generated numbers admit a run in every window (the loader checked that too).
    assert budget.max_run_tokens <= min(budget.session_limit, budget.daily_limit)
    text = path.read_text()
    assert "REVIEW THIS SECTION" in text
    assert f"{budget.session_limit} tokens per 5 hours" in text


def test_the_template_sets_the_public_url_serve_was_given(tmp_path: Path) -> None:
    from datetime import UTC, datetime
    path = tmp_path / "config.yaml"
    write_admin_token(path)
    path.write_text(new_config_text(path, datetime(2026, 5, 1, tzinfo=UTC),
                                    public_url="https://reviews.example.com/agent"))
    with pytest.raises(MissingCredentials) as caught:
        load_config(path, {})
    assert caught.value.config.server.public_url == "https://reviews.example.com/agent"
    assert "# public_url" not in path.read_text()


def test_serve_with_a_bad_public_url_writes_no_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from service.cli.main import main
    path = tmp_path / "new" / "config.yaml"
    assert main(["serve", "--config", str(path), "--public-url", "reviews.example.com"]) == 2
    assert "--public-url must be an http(s) URL" in capsys.readouterr().err
    assert not path.exists()


def test_check_config_says_registration_is_the_one_step_left(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("github: {api_url: 'https://ghe.example.com/api/v3'}\n"
                    "server: {public_url: 'https://reviews.example.com/'}\n"
                    "triggers: {}\nbudget: {session_tokens: 88000, weekly_tokens: 1500000, "
                    "max_run_tokens: 30000}\n")
    assert main(["check-config", str(path)]) == 3
    captured = capsys.readouterr()
    assert captured.err == ""  # not an error listing
    lines = captured.out.splitlines()
    assert lines[0] == f"{path}: registration is the one step left"
    assert f"pr-review-agent serve --config {path}" in captured.out
    assert "  github: not registered yet (API https://ghe.example.com/api/v3)" in lines
    assert "problem" not in captured.out
    # The rest of the summary is there, to review before registering.
    assert any("budget window session (5 h): 35200 tokens" in line for line in lines)
    assert any("public URL https://reviews.example.com" in line for line in lines)


def test_check_config_lists_every_problem_when_there_are_others(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("triggers: {}\nbudget: {session_tokens: 88000}\n")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}: 3 problem(s)")
    assert "github: required section is missing" in err


@pytest.mark.parametrize(("value", "message"), [
    ("reviews.example.com", "must be an http(s) URL with a host"),
    ("ftp://reviews.example.com", "must be an http(s) URL with a host"),
    ("https://", "must be an http(s) URL with a host"),
    ("https://x.example/?a=1", "must not have a query or a fragment"),
    ("https://x.example/#top", "must not have a query or a fragment"),
    ("https://x.example/a b", "must not contain whitespace"),
    (5, "must be a string"),
])
def test_public_url_must_be_a_plain_http_url(tmp_path: Path, value: object,
                                             message: str) -> None:
    data = {**copy.deepcopy(REST), "server": {"public_url": value}}
    exc = error_of(data, tmp_path)
    assert exc.registration_needed is False
    assert any(p.startswith(f"server.public_url: {message}") for p in exc.problems), \
        exc.problems


def test_public_url_loses_its_trailing_slash_and_keeps_a_path(tmp_path: Path) -> None:
    data = {**copy.deepcopy(REST), "server": {"public_url": "https://x.example/agent/"}}
    exc = error_of(data, tmp_path)
    assert isinstance(exc, MissingCredentials)
    assert exc.config.server.public_url == "https://x.example/agent"
    assert "public URL https://x.example/agent" in describe_config(exc.config)[2]
