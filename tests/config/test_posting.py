"""The sections of what the App posts, read from a file: ``ask`` (its defaults and bounds)
beside ``publish`` and ``checks``."""

from __future__ import annotations

from pathlib import Path

from service.config.posting import MAX_ANSWER_CHARS, AskConfig
from service.config.validate import parse_config
from tests.config_documents import (
    minimal,
    problems_of,
    rsa_pem,
    secrets_dir,
    with_key,
)

__all__ = ["rsa_pem", "secrets_dir"]  # fixtures


def test_ask_takes_its_defaults_and_reads_its_keys(secrets_dir: Path) -> None:
    assert parse_config(minimal(), {}, secrets_dir).ask == AskConfig(
        max_answer_chars=4_000, max_run_tokens=60_000)
    data = with_key("ask.max_answer_chars", 1_200)
    data["ask"]["max_run_tokens"] = 20_000
    assert parse_config(data, {}, secrets_dir).ask == AskConfig(
        max_answer_chars=1_200, max_run_tokens=20_000)


def test_an_answer_is_bounded_on_both_sides(secrets_dir: Path) -> None:
    data = with_key("ask.max_answer_chars", MAX_ANSWER_CHARS + 1)
    data["ask"]["max_run_tokens"] = 10
    assert problems_of(data, secrets_dir) == [
        f"ask.max_answer_chars: must be between 200 and {MAX_ANSWER_CHARS}, got "
        f"{MAX_ANSWER_CHARS + 1}",
        "ask.max_run_tokens: must be at least 1000, got 10",
    ]
    assert problems_of(with_key("ask.max_answer_chars", 10), secrets_dir) == [
        f"ask.max_answer_chars: must be between 200 and {MAX_ANSWER_CHARS}, got 10"]
