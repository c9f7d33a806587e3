"""``pr-review-agent check-config FILE``: exit 0 with the limits, or 2 with every problem."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.cli.main import main
from tests.kit.paths import CHECKOUT

REPO_ROOT = CHECKOUT
WEBHOOK_SECRET = "whsec-cli-91c3ab"

GOOD = """\
github:
  app_id: 123456
  private_key_file: app.pem
  webhook_secret_file: webhook
triggers: {}
budget:
  session_tokens: 88000
  weekly_tokens: 1500000
  max_run_tokens: 30000
"""

BAD = """\
github:
  app_id: 123456
  private_key_file: app.pem
  webhook_secret_file: missing-webhook
triggers: {}
budget:
  enabled: true
  session_tokens: 88000
  weekly_token: 1500000
  max_run_tokens: true
"""


@pytest.fixture(autouse=True)
def _no_secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads os.environ; a developer's exported secret must not change the result."""
    for name in (
        "GITHUB_APP_PRIVATE_KEY",
        "GITHUB_WEBHOOK_SECRET",
        "GITHUB_WEBHOOK_SECRET_PREVIOUS",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def pem() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


@pytest.fixture
def config_dir(tmp_path: Path, pem: bytes) -> Path:
    (tmp_path / "app.pem").write_bytes(pem)
    (tmp_path / "webhook").write_text(WEBHOOK_SECRET + "\n")
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "bad.yaml").write_text(BAD)
    return tmp_path


def test_good_file_exits_0_with_the_limits(
    config_dir: Path, pem: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_dir / "good.yaml"

    assert main(["check-config", str(path)]) == 0

    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0] == f"{path}: OK"
    assert "  budget window session (5 h): 35200 tokens (40% of session_tokens 88000)" in lines
    assert "  budget window daily (24 h): 85714 tokens (40% of weekly_tokens 1500000, ÷ 7)" in lines
    assert "  budget window weekly (7 d): 600000 tokens (40% of weekly_tokens 1500000)" in lines
    assert "  budget max_run_tokens: 30000 reserved per run" in lines
    assert f"  store: SQLite file {config_dir / 'state.db'}" in lines
    [isolation] = [line for line in lines if line.startswith("  engine isolation: ")]
    assert isolation.startswith("  engine isolation: landlock (ABI ") and "cannot open" in isolation
    assert WEBHOOK_SECRET not in out
    assert pem.decode().splitlines()[1] not in out


def test_a_postgresql_store_is_named_by_its_url(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_dir / "pg.yaml"
    path.write_text(GOOD + "store:\n  url: postgresql://agent@db.internal/reviews\n")
    assert main(["check-config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "  store: PostgreSQL at postgresql://agent@db.internal/reviews" in lines
    assert not any("state.db" in line for line in lines)


def test_an_engine_sandbox_that_opens_the_secrets_is_a_problem(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_dir / "open.yaml"
    path.write_text(GOOD + f"engine:\n  isolation_read_paths: [{config_dir}]\n")

    assert main(["check-config", str(path)]) == 2

    out, err = capsys.readouterr()
    assert out == ""
    first, problem = err.splitlines()
    assert first == f"{path}: 1 problem(s)"
    assert problem.startswith("  engine.isolation: the engine would be allowed to read ")
    assert f"lies under {config_dir}" in problem


def test_isolation_is_checked_for_its_value(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_dir / "typo.yaml"
    path.write_text(GOOD + "engine:\n  isolation: landlok\n  isolation_write_paths: [rel]\n")
    assert main(["check-config", str(path)]) == 2
    _, err = capsys.readouterr()
    # Every problem names its line, as a repository file's do.
    assert "  line 11: engine.isolation: must be one of landlock, none, got \"landlok\"" in err
    assert ("  line 12: engine.isolation_write_paths[0]: must look like an absolute path, "
            "got \"rel\"") in err


def test_bad_file_exits_2_listing_every_problem(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_dir / "bad.yaml"

    assert main(["check-config", str(path)]) == 2

    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"{path}: 4 problem(s)",
        f"  line 4: github.webhook_secret_file: cannot read {config_dir / 'missing-webhook'}: "
        "no such file",
        "  line 6: budget.weekly_tokens: required (your estimate of the plan's rolling weekly "
        "limit)",
        "  line 10: budget.max_run_tokens: must be an integer, got true",
        "  line 9: budget.weekly_token: unknown key (did you mean weekly_tokens?)",
    ]


def test_missing_file_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nowhere.yaml"
    assert main(["check-config", str(path)]) == 2
    _, err = capsys.readouterr()
    assert err.splitlines() == [
        f"{path}: 1 problem(s)",
        f"  config file: cannot read {path}: no such file",
    ]


def test_secret_from_the_environment(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (config_dir / "env.yaml").write_text(GOOD.replace("  webhook_secret_file: webhook\n", ""))
    monkeypatch.setenv("GITHUB_WEBHOOK_SECRET", WEBHOOK_SECRET)

    assert main(["check-config", str(config_dir / "env.yaml")]) == 0
    out, _ = capsys.readouterr()
    assert WEBHOOK_SECRET not in out


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GITHUB_") and key != "PYTHONPATH"
    }
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "service", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_python_dash_m_service_check_config(config_dir: Path) -> None:
    """The real entry point, in a child process, from another working directory."""
    good = _run("check-config", "good.yaml", cwd=config_dir)
    bad = _run("check-config", "bad.yaml", cwd=config_dir)

    assert (good.returncode, good.stderr) == (0, "")
    assert good.stdout.startswith("good.yaml: OK\n")
    assert "budget window daily (24 h): 85714 tokens" in good.stdout
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.startswith("bad.yaml: 4 problem(s)\n")
    assert "budget.weekly_token: unknown key (did you mean weekly_tokens?)" in bad.stderr


def test_an_engine_that_could_not_start_is_warned_about(
    config_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bindir = config_dir.parent / f"{config_dir.name}-bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))  # no claude here
    monkeypatch.delenv("CLAUDE_CODE_OAUTH_TOKEN", raising=False)
    assert main(["check-config", str(config_dir / "good.yaml")]) == 0
    out, _ = capsys.readouterr()
    warnings = [line for line in out.splitlines() if line.startswith("  warning: ")]
    assert warnings == [
        "  warning: engine.command: 'claude' is not on PATH or not executable; every review "
        "would end engine_unavailable",
        "  warning: engine.credential_env: CLAUDE_CODE_OAUTH_TOKEN is not set; claude would "
        "not be logged in (give the token from `claude setup-token`)",
    ]

    fake = bindir / "claude"  # beside the secrets, the sandbox check would refuse it
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-x")
    assert main(["check-config", str(config_dir / "good.yaml")]) == 0
    assert "warning:" not in capsys.readouterr().out


def test_config_is_also_taken_as_every_other_command_takes_it(
    config_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config_dir / "good.yaml"
    assert main(["check-config", "--config", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{path}: OK"
    assert main(["check-config", str(path), "--config", str(path)]) == 0  # the same, twice
    capsys.readouterr()
    assert main(["check-config", str(path), "--config", str(config_dir / "bad.yaml")]) == 2
    assert "give the config once" in capsys.readouterr().err
    assert main(["check-config"]) == 2
    assert "give a config FILE (or --config FILE)" in capsys.readouterr().err
