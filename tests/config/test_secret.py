"""A secret never shows itself, yet compares and hashes by its value."""

from __future__ import annotations

from pathlib import Path

from service.config.secret import Secret


def test_a_secret_never_shows_its_value() -> None:
    secret = Secret("hunter2", source=Path("/etc/app/webhook"))
    for shown in (repr(secret), str(secret), f"{secret}", f"{[secret]}", f"{ {'k': secret} }"):
        assert "hunter2" not in shown
        assert "***" in shown
    assert "hunter2" not in str(ValueError(secret)) and "hunter2" not in repr(
        ValueError(secret))
    assert secret.reveal() == "hunter2"
    assert secret.source == Path("/etc/app/webhook")


def test_secrets_compare_and_hash_by_value_whatever_their_source() -> None:
    a, b = Secret("s", source=Path("a")), Secret("s")
    assert a == b and hash(a) == hash(b)
    assert Secret("s") != Secret("t")
    assert Secret("s") != "s"  # never equal to the plain string it holds
    assert len({a, b, Secret("t")}) == 2
