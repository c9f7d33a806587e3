"""Whether a pid still names a running process: a real child, alive then reaped."""

from __future__ import annotations

import os
import subprocess
import sys

from service.runtime.pids import alive


def test_this_process_and_a_running_child_are_alive_and_a_reaped_one_is_not() -> None:
    assert alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    try:
        assert alive(child.pid)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()
    # Reaped: the kernel has forgotten the pid. Linux hands pids out in increasing order up
    # to pid_max before it wraps, so it is not someone else's a moment later.
    assert not alive(child.pid)


def test_a_process_we_may_not_signal_counts_as_alive() -> None:
    # pid 1 always exists; as root the signal 0 succeeds, otherwise it is refused with
    # EPERM — either way the answer is "alive".
    assert alive(1)
