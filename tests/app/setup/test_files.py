"""What registration writes to disk: secrets for the owner alone, the place checked first,
only the config's github section rewritten."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml

from service.app.setup.files import key_paths, with_credentials, writable_problem, write_private


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
