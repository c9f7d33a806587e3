"""The engine's launcher, the second wall: it confines itself with Landlock to what the
policy opens and then becomes the engine, proven by running Python under it; a launch it
cannot understand runs nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.engine.confine import MARK, launcher_argv, main
from service.engine.sandbox import (
    SYSTEM_READ,
    install_roots,
)
from tests.engine.confinement import host, needs_landlock
from tests.kit.paths import CHECKOUT

__all__ = ["host"]  # the fixture


def run_confined(tmp_path: Path, policy: dict[str, Any],
                 code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by Python through the launcher, confined by ``policy``."""
    policy = {"read": [*SYSTEM_READ, *install_roots(sys.executable, os.environ.get("PATH")),
                       *policy.get("read", [])],
              "write": ["/dev/null", *policy.get("write", [])]}
    return subprocess.run(
        [*launcher_argv(policy), "--", sys.executable, "-I", "-c", code],
        capture_output=True, text=True, check=False, cwd=tmp_path, timeout=60)


@needs_landlock
def test_launcher_confines_reads_to_what_the_policy_opens(
        tmp_path: Path, host: dict[str, Path]) -> None:
    probe = (
        "import os, json, sys\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        out[p] = open(p).read() if not os.path.isdir(p) else os.listdir(p)\n"
        "    except OSError as e:\n"
        "        out[p] = e.errno\n"
        "print(json.dumps(out))\n"
    )
    wt = host["worktree"]
    paths = [str(wt / "src" / "app.py"), str(host["key"]), str(wt / "../../../secrets/app.pem"),
             str(wt / "innocent.txt"), str(host["config"]), str(host["store"]),
             str(host["credentials"]), str(host["secrets"]), str(host["service"])]
    code = probe.replace("sys.argv[1:]", repr(paths))
    done = run_confined(tmp_path, {"read": [str(wt)]}, code)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop(str(wt / "src" / "app.py")) == "print('inside')\n"
    assert set(seen.values()) == {13}, seen  # EACCES for every one of the others


@needs_landlock
def test_launcher_keeps_the_service_process_environment_out_of_reach(tmp_path: Path) -> None:
    # The service (this test process) is the launcher's ancestor; /proc is readable, but
    # Landlock does not let a confined process read an unconfined one's environment.
    code = (f"import sys\ntry:\n    open('/proc/{os.getpid()}/environ','rb').read()\n"
            "    print('read')\nexcept OSError as e:\n    print(e.errno)\n")
    done = run_confined(tmp_path, {}, code)
    assert done.stdout.strip() == "13", done.stderr


def test_launcher_that_cannot_confine_runs_nothing(tmp_path: Path) -> None:
    # A policy naming a path it may not open as a rule makes landlock_add_rule fail or the
    # process refuse; either way the command must not run. A malformed policy is refused.
    done = subprocess.run(
        [*launcher_argv({"read": "not-a-list"}), "--", "touch", str(tmp_path / "ran")],
        capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 2 and done.stderr.startswith(MARK)
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(("argv", "said"), [
    ([], "usage: confine POLICY -- COMMAND"),
    (["{not json"], "bad policy"),
    (['["read"]'], "bad policy: the policy must be a JSON object"),
    (['{"read": []}'], "nothing to run"),
    (['{"read": []}', "--"], "nothing to run"),
])
def test_a_launch_that_cannot_be_understood_confines_and_runs_nothing(
        argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Refused before anything is restricted (so safe to call in this process): exit 2."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(MARK) and said in err


def test_the_launcher_runs_isolated_with_only_the_services_own_directory() -> None:
    argv = launcher_argv({"read": ["/usr"], "write": []})
    assert argv[:3] == [sys.executable, "-I", "-c"]
    assert json.loads(argv[-1]) == {"read": ["/usr"], "write": []}
    assert Path(argv[-2]) == CHECKOUT  # the directory whose service/ package it imports
