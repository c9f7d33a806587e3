"""Config documents the config tests start from: the least a valid file says, and a file
that sets every key; and the directory beside them that holds the App's key and webhook
secret as files (the ``secrets_dir`` fixture, keys generated at run time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from service.config.errors import ConfigError
from service.config.validate import parse_config

__all__ = ["ADMIN_TOKEN", "PREVIOUS_SECRET", "REPOSITORY_FILE", "WEBHOOK_SECRET", "full",
           "minimal", "pem", "problems_of", "rsa_pem", "secrets_dir", "with_key"]

WEBHOOK_SECRET = "whsec-current-3f9a1c"
PREVIOUS_SECRET = "whsec-previous-77b2e0"
ADMIN_TOKEN = "admin-token-5d8e61c0"


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, password: bytes = b"") -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


@pytest.fixture(scope="module")
def rsa_pem() -> str:
    return pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture
def secrets_dir(tmp_path: Path, rsa_pem: str) -> Path:
    """A config directory holding the App key and the webhook secret as files."""
    (tmp_path / "app.pem").write_text(rsa_pem)
    (tmp_path / "webhook").write_text(WEBHOOK_SECRET + "\n")
    return tmp_path


def minimal() -> dict[str, Any]:
    return {
        "github": {
            "app_id": 123456,
            "private_key_file": "app.pem",
            "webhook_secret_file": "webhook",
        },
        "triggers": {},
        "budget": {"session_tokens": 88000, "weekly_tokens": 1500000, "max_run_tokens": 30000},
    }


def full() -> dict[str, Any]:
    """Every key of the schema, none at its default."""
    return {
        "github": {
            "app_id": 42,
            "private_key_file": "app.pem",
            "webhook_secret_file": "webhook",
            "previous_webhook_secret_file": "webhook.old",
            "api_url": "https://ghe.example.com/api/v3/",
            "repositories": ["acme/widgets", "acme/gadgets.js"],
        },
        "server": {
            "host": "127.0.0.1",
            "port": 9090,
            "webhook_path": "/hooks/github",
            "admin_token_file": "admin",
            "max_body_bytes": 1048576,
        },
        "store": {"path": "data/state.db"},
        "poller": {"interval_seconds": 60},
        "triggers": {
            "mention": "@reviewbot",
            "auto_review": False,
            "on_push": True,
            "allowed_associations": ["OWNER", "CONTRIBUTOR"],
            "allowed_users": ["octocat", "hubot-2"],
        },
        "workers": {"count": 4, "lease_seconds": 1800},
        "engine": {
            "kind": "anthropic",
            "command": "/usr/local/bin/claude",
            "model": "claude-sonnet-4",
            "max_turns": 50,
            "wall_clock_seconds": 600,
        },
        "review": {"excluded_paths": ["*.min.js"], "max_diff_lines": 2000},
        "publish": {"dry_run": True},
        "retention": {"purge_after_close": False},
        "budget": {
            "enabled": False,
            "session_tokens": 100000,
            "weekly_tokens": 2000000,
            "max_run_tokens": 20000,
            "reviewer_share_pct": 25,
        },
    }


def problems_of(data: object, base_dir: Path, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(data, environ or {}, base_dir)
    return caught.value.problems


def with_key(path: str, value: object) -> dict[str, Any]:
    """The minimal config with ``path`` (dotted) set to ``value``."""
    data = minimal()
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return data


#: A repository's `.github/pr-review-agent.yml` that sets every key.
REPOSITORY_FILE = """\
auto_review: on
on_push: true
drafts: false
excluded_paths: ["docs/generated/**", "*.snap"]
guidelines: docs/review-guidelines.md
instructions: Prefer small functions.
path_instructions:
  - path: "migrations/**"
    instructions: Every migration must be reversible.
min_severity: minor
max_findings: 15
checks:
  fail_on: major
language: pt-BR
"""
