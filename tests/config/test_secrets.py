"""The config's secrets: read from the file a key names (relative to the config) or from
the environment, a private key checked to be an unencrypted RSA key, and no secret in a
repr, a problem or an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from service.config.describe import describe_config
from service.config.errors import ConfigError
from service.config.secret import Secret
from service.config.validate import parse_config
from tests.config_documents import (
    ADMIN_TOKEN,
    PREVIOUS_SECRET,
    WEBHOOK_SECRET,
    minimal,
    pem,
    problems_of,
    rsa_pem,
    secrets_dir,
    with_key,
)

__all__ = ["rsa_pem", "secrets_dir"]  # fixtures


def test_secrets_from_the_environment(tmp_path: Path, rsa_pem: str) -> None:
    data = minimal()
    del data["github"]["private_key_file"], data["github"]["webhook_secret_file"]
    environ = {
        "GITHUB_APP_PRIVATE_KEY": rsa_pem,
        "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "GITHUB_WEBHOOK_SECRET_PREVIOUS": PREVIOUS_SECRET,
    }
    config = parse_config(data, environ, tmp_path)
    assert config.github.private_key.reveal() == rsa_pem.strip()
    assert config.github.webhook_secrets == (Secret(WEBHOOK_SECRET), Secret(PREVIOUS_SECRET))


def test_private_key_on_one_line_with_escaped_newlines(tmp_path: Path, rsa_pem: str) -> None:
    data = with_key("github.webhook_secret_file", None)
    del data["github"]["private_key_file"]
    environ = {
        "GITHUB_APP_PRIVATE_KEY": rsa_pem.replace("\n", "\\n"),
        "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
    }
    config = parse_config(data, environ, tmp_path)
    assert config.github.private_key.reveal() == rsa_pem.strip()


def test_previous_webhook_secret_from_a_file_comes_second(secrets_dir: Path) -> None:
    (secrets_dir / "old").write_text(PREVIOUS_SECRET)
    config = parse_config(with_key("github.previous_webhook_secret_file", "old"), {}, secrets_dir)
    assert config.github.webhook_secrets == (Secret(WEBHOOK_SECRET), Secret(PREVIOUS_SECRET))


def test_previous_secret_equal_to_current_counts_once(secrets_dir: Path) -> None:
    config = parse_config(
        minimal(), {"GITHUB_WEBHOOK_SECRET_PREVIOUS": WEBHOOK_SECRET}, secrets_dir
    )
    assert config.github.webhook_secrets == (Secret(WEBHOOK_SECRET),)


def test_admin_token_file(secrets_dir: Path) -> None:
    (secrets_dir / "admin").write_text(ADMIN_TOKEN)
    config = parse_config(with_key("server.admin_token_file", "admin"), {}, secrets_dir)
    assert config.server.admin_token == Secret(ADMIN_TOKEN)


def test_a_secret_in_both_file_and_environment_is_refused(secrets_dir: Path) -> None:
    problems = problems_of(minimal(), secrets_dir, {"GITHUB_WEBHOOK_SECRET": "other"})
    assert problems == [
        "github.webhook_secret_file: set here and in the environment variable "
        "GITHUB_WEBHOOK_SECRET; keep one"
    ]


def test_missing_secrets_name_the_key_and_the_variable(tmp_path: Path) -> None:
    data = minimal()
    del data["github"]["private_key_file"], data["github"]["webhook_secret_file"]
    assert problems_of(data, tmp_path) == [
        "github.private_key_file: required (a file path, or set the environment variable "
        "GITHUB_APP_PRIVATE_KEY)",
        "github.webhook_secret_file: required (a file path, or set the environment variable "
        "GITHUB_WEBHOOK_SECRET)",
    ]


def test_missing_secret_file_names_key_and_path(secrets_dir: Path) -> None:
    problems = problems_of(with_key("github.webhook_secret_file", "nope/hook"), secrets_dir)
    assert problems == [
        f"github.webhook_secret_file: cannot read {secrets_dir / 'nope' / 'hook'}: no such file"
    ]


@pytest.mark.parametrize("content", ["", "\n", "  \n\t\n"])
def test_empty_secret_file_names_key_and_path(secrets_dir: Path, content: str) -> None:
    (secrets_dir / "admin").write_text(content)
    problems = problems_of(with_key("server.admin_token_file", "admin"), secrets_dir)
    assert problems == [f"server.admin_token_file: {secrets_dir / 'admin'} is empty"]


def test_empty_secret_in_environment(tmp_path: Path, rsa_pem: str) -> None:
    data = with_key("github.webhook_secret_file", None)
    data["github"]["private_key_file"] = None
    environ = {"GITHUB_APP_PRIVATE_KEY": rsa_pem, "GITHUB_WEBHOOK_SECRET": ""}
    assert problems_of(data, tmp_path, environ) == [
        "github.webhook_secret_file: the environment variable GITHUB_WEBHOOK_SECRET is empty"
    ]


def test_secret_path_that_is_a_directory(secrets_dir: Path) -> None:
    (secrets_dir / "adir").mkdir()
    problems = problems_of(with_key("github.webhook_secret_file", "adir"), secrets_dir)
    assert problems == [
        f"github.webhook_secret_file: cannot read {secrets_dir / 'adir'}: it is a directory"
    ]


def test_unreadable_secret_file_does_not_leak_content(
        secrets_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hidden = secrets_dir / "webhook"
    real_open = Path.open

    def guarded(self: Path, *args: Any, **kwargs: Any) -> Any:
        # What chmod 000 does for anyone but root (the tests may run as root).
        if self == hidden:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded)
    problems = problems_of(minimal(), secrets_dir)
    assert problems == [f"github.webhook_secret_file: cannot read {hidden}: permission denied"]


def test_secret_file_that_is_not_text(secrets_dir: Path) -> None:
    (secrets_dir / "webhook").write_bytes(b"\xff\xfe\x00secret")
    assert problems_of(minimal(), secrets_dir) == [
        f"github.webhook_secret_file: {secrets_dir / 'webhook'} is not UTF-8 text"
    ]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("ssh-rsa AAAAB3NzaC1yc2E-not-a-pem", "is not a PEM private key"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n",
            "holds a PEM block that is not a readable private key",
        ),
    ],
)
def test_private_key_that_is_not_a_pem_key(secrets_dir: Path, content: str, why: str) -> None:
    (secrets_dir / "app.pem").write_text(content)
    problems = problems_of(minimal(), secrets_dir)
    assert len(problems) == 1
    assert problems[0].startswith(f"github.private_key_file: {secrets_dir / 'app.pem'} {why}")
    assert content.strip() not in problems[0]
    assert "bm90IGEga2V5" not in problems[0]


def test_private_key_that_is_not_rsa(secrets_dir: Path) -> None:
    (secrets_dir / "app.pem").write_text(pem(ec.generate_private_key(ec.SECP256R1())))
    assert problems_of(minimal(), secrets_dir) == [
        f"github.private_key_file: {secrets_dir / 'app.pem'} is not an RSA key "
        "(GitHub Apps sign their JWTs with RS256)"
    ]


def test_encrypted_private_key(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    data = with_key("github.private_key_file", None)
    environ = {"GITHUB_APP_PRIVATE_KEY": pem(key, password=b"hunter2")}
    (tmp_path / "webhook").write_text(WEBHOOK_SECRET)
    assert problems_of(data, tmp_path, environ) == [
        "github.private_key_file: the environment variable GITHUB_APP_PRIVATE_KEY is encrypted "
        "with a passphrase; the App key must be stored unencrypted"
    ]


def test_secrets_never_appear_in_reprs_or_errors(secrets_dir: Path, rsa_pem: str) -> None:
    config = parse_config(minimal(), {}, secrets_dir)
    body = rsa_pem.splitlines()[1]
    for text in (repr(config), str(config), "\n".join(describe_config(config))):
        assert WEBHOOK_SECRET not in text
        assert body not in text
    # An error elsewhere in the file does not drag secrets into the message either.
    with pytest.raises(ConfigError) as caught:
        parse_config(with_key("budget.enabled", "yes"), {}, secrets_dir)
    assert WEBHOOK_SECRET not in str(caught.value)
    assert body not in str(caught.value)
