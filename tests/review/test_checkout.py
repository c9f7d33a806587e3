"""The git cache: names checked before they become paths, the token scoped to the origin,
a hanging git killed, the sweep."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from service.review.checkout import (
    Checkouts,
    GitError,
    GitRunner,
    auth_header,
    git_environment,
    token_config,
)
from tests.kit.waiting import wait_for

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)




def test_the_token_is_scoped_to_the_remote_s_origin(monkeypatch: pytest.MonkeyPatch) -> None:
    env = token_config("https://github.example.com/o/r.git", "tok")
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.example.com/.extraheader"
    assert env["GIT_CONFIG_VALUE_0"] == auth_header("tok")
    assert auth_header("tok") == "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9r"
    assert token_config("file:///srv/r.git", "tok")["GIT_CONFIG_KEY_0"] == "http.extraheader"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-git")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    env = git_environment()
    assert "ANTHROPIC_API_KEY" not in env and env["HTTPS_PROXY"] == "http://proxy:3128"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and env["GIT_TERMINAL_PROMPT"] == "0"


@pytest.mark.anyio
async def test_a_git_that_hangs_is_killed_with_its_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = tmp_path / "slow-git"
    script.write_text(f"#!/bin/sh\nsleep 30 &\necho $! > '{pidfile}'\nwait\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(GitError, match=r"no answer within 0\.3 s") as caught:
        await GitRunner(executable=str(script), timeout=0.3)(["fetch"])
    assert caught.value.returncode is None
    child = int(pidfile.read_text())
    # The grandchild went with the group (reaped by init, or a zombie at worst). It was
    # sent SIGKILL before the runner returned; a loaded machine's kernel may take a moment
    # to act on it, so that is waited for (bounded by the ceiling).
    def gone() -> bool:
        return subprocess.run(["ps", "-o", "stat=", "-p", str(child)], capture_output=True,
                              text=True, check=False).stdout.strip() in ("", "Z")
    assert wait_for("the grandchild to die", gone, interval=0.05)


@pytest.mark.anyio
async def test_git_errors_carry_git_s_words_without_the_secret(tmp_path: Path) -> None:
    script = tmp_path / "bad-git"
    script.write_text("#!/bin/sh\necho 'fatal: could not read from tok123' >&2\nexit 128\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(GitError) as caught:
        await GitRunner(executable=str(script))(["fetch"], secret="tok123")
    assert caught.value.returncode == 128
    assert "tok123" not in str(caught.value) and "could not read from ***" in str(caught.value)


def test_sweep_removes_worktrees_of_dead_processes_only(tmp_path: Path) -> None:
    checkouts = Checkouts(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    for name in (f"{dead}-aaaa", f"{os.getpid()}-bbbb", "1-cccc", "junk"):
        (checkouts.worktrees / name).mkdir(parents=True)
        (checkouts.worktrees / name / "f.txt").write_text("x")
    removed = checkouts.sweep()
    assert [p.name for p in removed] == [f"{dead}-aaaa"]
    assert sorted(p.name for p in checkouts.worktrees.iterdir()) == [
        "1-cccc", f"{os.getpid()}-bbbb", "junk"]
