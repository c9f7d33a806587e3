"""Running the engine's child in its own process group: stdin in, stdout as bounded lines,
stderr's tail kept, and the whole group killed whatever ends the run — real processes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from service.engine.process import ProcessOutcome, Verdict, run_process
from tests.kit.waiting import wait_for

PY = sys.executable


async def _run(code: str, tmp_path: Path, *, stdin: bytes = b"", timeout: float = 60,
               on_line: Callable[[bytes], Verdict] | None = None,
               max_line_bytes: int = 1024) -> tuple[ProcessOutcome, list[bytes]]:
    seen: list[bytes] = []

    def record(line: bytes) -> Verdict:
        seen.append(line)
        return on_line(line) if on_line is not None else Verdict.CONTINUE

    outcome = await run_process([PY, "-c", code], stdin=stdin, cwd=tmp_path,
                                env={"PATH": os.environ.get("PATH", "")}, timeout=timeout,
                                on_line=record, kill_grace=5, wind_down=5,
                                max_line_bytes=max_line_bytes)
    return outcome, seen


@pytest.mark.anyio
async def test_stdin_in_lines_out_and_the_tail_of_stderr(tmp_path: Path) -> None:
    code = ("import sys\ndata = sys.stdin.read()\nprint('got', len(data))\nprint('two')\n"
            "sys.stderr.write('E' * 10000 + 'END')\nsys.exit(3)")
    outcome, seen = await _run(code, tmp_path, stdin=b"x" * 100_000)
    assert seen == [b"got 100000", b"two"]
    assert outcome.exit_code == 3 and outcome.killed is None
    tail = outcome.stderr_tail
    assert tail.endswith("END") and len(tail) < 10000  # only its last few KiB


@pytest.mark.anyio
async def test_an_over_long_line_is_counted_and_skipped_not_buffered(tmp_path: Path) -> None:
    code = "print('a' * 100000)\nprint('short')"
    outcome, seen = await _run(code, tmp_path, max_line_bytes=1000)
    assert seen == [b"short"]
    assert outcome.oversized_lines == 1


def _dead(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.mark.anyio
async def test_a_stop_kills_the_group_children_included(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    code = ("import subprocess, sys, time\n"
            f"p = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(600)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
            "print('ready', flush=True)\ntime.sleep(600)")
    outcome, seen = await _run(code, tmp_path, on_line=lambda _: Verdict.STOP)
    assert seen == [b"ready"] and outcome.killed == "stopped"
    assert outcome.exit_code is None
    grandchild = int(pidfile.read_text())
    # The group was sent SIGKILL before run_process returned; on a busy machine the
    # kernel may take a moment to act on it. So wait for that (a hang fails at the
    # ceiling): gone, or a zombie waiting for init — never still sleeping.
    assert wait_for("the grandchild to die", lambda: _dead(grandchild), interval=0.02)


@pytest.mark.anyio
async def test_a_child_past_its_deadline_is_killed(tmp_path: Path) -> None:
    outcome, _ = await _run("import time; time.sleep(600)", tmp_path, timeout=0.5)
    assert outcome.killed == "deadline" and outcome.exit_code is None


@pytest.mark.anyio
async def test_a_child_that_cannot_start_raises(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        await run_process([str(tmp_path / "no-such-program")], stdin=b"", cwd=tmp_path,
                          env={}, timeout=5, on_line=lambda _: Verdict.CONTINUE,
                          kill_grace=1, wind_down=1, max_line_bytes=100)
