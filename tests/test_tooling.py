"""The tooling bar is part of the suite: ruff and mypy (strict) clean on service/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def test_ruff_is_clean() -> None:
    result = run("ruff", "check", "service", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean_on_service() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
