"""SIGHUP's reload: budget and dry_run in place, the rest waits for a restart."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.app.reload import reload_config
from service.budget.governor import Governor
from service.config.strict_yaml import load_config
from tests.kit.stores import new_sqlite_store


@pytest.fixture(scope="module")
def key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def write(path: Path, *, weekly: int = 1_500_000, dry_run: bool = False, port: int = 8080,
          enabled: bool = True) -> None:
    path.write_text(yaml.safe_dump({
        "github": {"app_id": 1, "private_key_file": "app.pem", "webhook_secret_file": "hook"},
        "server": {"port": port},
        "triggers": {},
        "publish": {"dry_run": dry_run},
        "budget": {"enabled": enabled, "session_tokens": 88_000, "weekly_tokens": weekly,
                   "max_run_tokens": 30_000},
    }))


@pytest.fixture
def config_file(tmp_path: Path, key_pem: str) -> Path:
    (tmp_path / "app.pem").write_text(key_pem)
    (tmp_path / "hook").write_text("s3cret-hook")
    path = tmp_path / "config.yaml"
    write(path)
    return path


def test_budget_and_dry_run_apply_at_once(config_file: Path, tmp_path: Path) -> None:
    current = load_config(config_file, {})
    with new_sqlite_store(tmp_path / "s.db") as store:
        governor = Governor(store, current.budget)
        write(config_file, weekly=700_000, dry_run=True, enabled=False)
        result = reload_config(config_file, {}, current)
        governor.config = result.config.budget  # what the daemon does
        assert result.applied == ("budget", "publish.dry_run")
        assert result.needs_restart == ()
        assert governor.config.enabled is False
        assert governor.config.weekly_limit == 280_000
        assert result.config.publish.dry_run is True


def test_other_changes_need_a_restart_and_are_not_half_applied(
        config_file: Path, caplog: pytest.LogCaptureFixture) -> None:
    current = load_config(config_file, {})
    write(config_file, port=9999, weekly=700_000)
    with caplog.at_level(logging.WARNING):
        result = reload_config(config_file, {}, current)
    assert result.needs_restart == ("server",)
    assert result.config.server.port == 8080  # still the running value
    assert result.config.budget.weekly_tokens == 700_000
    assert "need a restart" in caplog.text and "server" in caplog.text


@pytest.mark.parametrize("broken", [
    "budget: [unclosed",                       # does not parse
    "github: {}\ntriggers: {}\nbudget: {}\n",  # does not validate
])
def test_a_broken_file_keeps_the_previous_config(
        config_file: Path, broken: str, caplog: pytest.LogCaptureFixture) -> None:
    current = load_config(config_file, {})
    config_file.write_text(broken)
    with caplog.at_level(logging.ERROR):
        result = reload_config(config_file, {}, current)
    assert result.config is current
    assert result.error
    assert result.applied == ()
    assert any(r.levelno == logging.ERROR and "previous config stays" in r.getMessage()
               for r in caplog.records)
    assert "s3cret-hook" not in caplog.text
