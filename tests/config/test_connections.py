"""The config sections that connect the App to the world: the store (SQLite or PostgreSQL)
and its password."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config.validate import parse_config
from tests.config_documents import minimal, problems_of, rsa_pem, secrets_dir, with_key

__all__ = ["rsa_pem", "secrets_dir"]  # fixtures


def test_the_store_is_the_sqlite_file_unless_a_postgresql_url_is_given(
        secrets_dir: Path) -> None:
    assert parse_config(minimal(), {}, secrets_dir).store.url is None
    (secrets_dir / "pg-password").write_text("s3cret\n")
    data = with_key("store.url", "postgresql://reviewer@db.internal:5432/reviews?sslmode=require")
    data["store"]["password_file"] = "pg-password"
    store = parse_config(data, {}, secrets_dir).store
    assert store.url == "postgresql://reviewer@db.internal:5432/reviews?sslmode=require"
    assert store.password is not None and store.password.reveal() == "s3cret"
    assert "s3cret" not in repr(store)
    # Beside a URL, the path names the directory for the checkout cache and engine homes.
    data["store"]["path"] = "/var/lib/agent/state.db"
    assert parse_config(data, {}, secrets_dir).store.path == "/var/lib/agent/state.db"


@pytest.mark.parametrize(("store", "problem"), [
    ({"url": "mysql://db/reviews"}, 'store.url: must be a postgresql:// URL, got "mysql://db/reviews"'),
    ({"url": "postgresql://reviewer:hunter2@db/reviews"},
     "store.url: must not hold a password: put it in store.password_file, or give it to libpq "
     "as PGPASSWORD or in ~/.pgpass"),
    ({"password_file": "pg-password"},
     "store.password_file: is for store.url; the SQLite file needs none"),
])
def test_store_settings_that_cannot_both_hold_are_refused(
        secrets_dir: Path, store: dict[str, str], problem: str) -> None:
    (secrets_dir / "pg-password").write_text("s3cret")
    data = minimal()
    data["store"] = store
    problems = problems_of(data, secrets_dir)
    assert problems == [problem]
    assert not any("hunter2" in p for p in problems)


def test_a_previous_webhook_secret_equal_to_the_current_one_is_one_secret(
        secrets_dir: Path) -> None:
    data = minimal()
    (secrets_dir / "webhook.copy").write_text((secrets_dir / "webhook").read_text())
    data["github"]["previous_webhook_secret_file"] = "webhook.copy"
    config = parse_config(data, {}, secrets_dir)
    assert len(config.github.webhook_secrets) == 1


def test_urls_lose_a_trailing_slash(secrets_dir: Path) -> None:
    data = with_key("github.api_url", "https://ghe.example.com/api/v3/")
    data["server"] = {"public_url": "https://reviews.example.com/agent/"}
    config = parse_config(data, {}, secrets_dir)
    assert config.github.api_url == "https://ghe.example.com/api/v3"
    assert config.server.public_url == "https://reviews.example.com/agent"
