"""The pure parts of registration: URLs, the manifest, and what is written to disk."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from service.app.setup.files import key_paths, with_credentials, writable_problem, write_private
from service.app.setup.manifest import (
    MANIFEST,
    build_manifest,
    install_url,
    public_url_for,
    registration_url,
)
from service.config.schema import ServerConfig
from service.github.urls import web_url_for
from tests.kit.paths import CHECKOUT
from tests.simulator import World

ROOT = CHECKOUT


def test_the_packaged_manifest_is_app_manifest_json() -> None:
    # The wheel carries service/, not the repository's top level: one document, two homes.
    assert json.loads((ROOT / "app-manifest.json").read_text()) == MANIFEST


@pytest.mark.parametrize(("api_url", "web_url"), [
    ("https://api.github.com", "https://github.com"),
    ("https://api.github.com/", "https://github.com"),
    ("https://ghe.example.com/api/v3", "https://ghe.example.com"),
    ("https://ghe.example.com:8443/api/v3/", "https://ghe.example.com:8443"),
    ("https://api.acme.ghe.com", "https://acme.ghe.com"),
    ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
])
def test_the_web_root_follows_the_api_root(api_url: str, web_url: str) -> None:
    assert web_url_for(api_url) == web_url


def test_registration_urls_for_a_person_and_an_organisation() -> None:
    assert registration_url("https://github.com", "s t") == \
        "https://github.com/settings/apps/new?state=s+t"
    assert registration_url("https://ghe.example.com", "abc", "acme-corp") == \
        "https://ghe.example.com/organizations/acme-corp/settings/apps/new?state=abc"
    with pytest.raises(ValueError, match="organisation"):
        registration_url("https://github.com", "abc", "../admin")
    assert install_url("https://github.com/apps/x/") == \
        "https://github.com/apps/x/installations/new"


@pytest.mark.parametrize(("server", "override", "expected"), [
    (ServerConfig(), None, "http://localhost:8080"),
    (ServerConfig(host="10.0.0.5", port=9000), None, "http://10.0.0.5:9000"),
    (ServerConfig(host="::1", port=9000), None, "http://[::1]:9000"),
    (ServerConfig(public_url="https://r.example"), None, "https://r.example"),
    (ServerConfig(public_url="https://r.example"), "https://o.example/", "https://o.example"),
])
def test_the_public_url_comes_from_the_flag_the_config_or_the_address(
        server: ServerConfig, override: str | None, expected: str) -> None:
    assert public_url_for(server, override) == expected


def test_a_bad_public_url_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="--public-url must be an http"):
        public_url_for(ServerConfig(), "reviews.example.com")


def test_the_built_manifest_is_one_github_accepts() -> None:
    manifest = build_manifest("https://r.example/agent", "https://r.example/agent/hook")
    assert manifest["url"] == "https://r.example/agent"
    assert manifest["hook_attributes"] == {"url": "https://r.example/agent/hook",
                                           "active": True}
    assert manifest["redirect_url"] == "https://r.example/agent/setup/callback"
    assert MANIFEST["hook_attributes"]["url"] == "https://example.invalid/webhook"  # a copy
    World().create_manifest_code(manifest)  # raises as GitHub's form would refuse it


def test_secrets_are_written_for_the_owner_alone(tmp_path: Path) -> None:
    key, secret = key_paths(tmp_path / "config.yaml", 42)
    assert (key.name, secret.name) == ("github-app-42.pem", "webhook-secret-42")
    old = os.umask(0)  # the most permissive umask must not loosen the mode
    try:
        write_private(key, "pem text")
        key.parent.chmod(0o755)
        write_private(secret, "hook")  # an existing, looser directory is tightened
    finally:
        os.umask(old)
    assert key.read_text() == "pem text" and secret.read_text() == "hook"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    write_private(key, "replaced")
    assert key.read_text() == "replaced" and sorted(p.name for p in key.parent.iterdir()) == [
        "github-app-42.pem", "webhook-secret-42"]


def test_a_place_registration_cannot_write_is_found_before_it_starts(tmp_path: Path) -> None:
    assert writable_problem(tmp_path / "config.yaml") is None
    (tmp_path / "file").write_text("")
    assert writable_problem(tmp_path / "file" / "config.yaml") == \
        f"{tmp_path / 'file'} is not a directory"
    (tmp_path / "secrets").write_text("")
    assert writable_problem(tmp_path / "config.yaml") == \
        f"{tmp_path / 'secrets'} is not a writable directory"


GITHUB = {"app_id": 7, "private_key_file": "secrets/k.pem", "webhook_secret_file": "secrets/w"}


@pytest.mark.parametrize(("before", "kept"), [
    ("# mine\nserver:\n  port: 1  # why\ntriggers: {}\n", "server:\n  port: 1  # why\n"),
    ("github:\n  api_url: https://g.example/api/v3  # GHES\n  repositories:\n  - a/b\n"
     "# next\nserver: {port: 9}\n", "# next\nserver: {port: 9}\n"),
    ("github: {api_url: 'http://x'}\nbudget: {a: 1}\n", "budget: {a: 1}\n"),
    ("triggers: {}\ngithub:\n  webhook_secret_file: /run/w\n", "triggers: {}\n"),
])
def test_only_the_github_section_is_rewritten(before: str, kept: str) -> None:
    after = with_credentials(before, 7, "secrets/k.pem", "secrets/w")
    assert kept in after
    old = yaml.safe_load(before).get("github") or {}
    new = yaml.safe_load(after)
    assert new["github"] == {**old, **GITHUB}
    assert {k: v for k, v in new.items() if k != "github"} == \
        {k: v for k, v in yaml.safe_load(before).items() if k != "github"}


def test_a_flow_style_file_and_an_empty_one_still_get_their_section() -> None:
    after = with_credentials("{triggers: {}, budget: {a: 1}}", 7, "secrets/k.pem", "secrets/w")
    assert yaml.safe_load(after) == {"github": GITHUB, "triggers": {}, "budget": {"a": 1}}
    assert yaml.safe_load(with_credentials("", 7, "secrets/k.pem", "secrets/w")) == \
        {"github": GITHUB}
    with pytest.raises(ValueError, match="not a mapping"):
        with_credentials("- a\n- b\n", 7, "k", "w")
