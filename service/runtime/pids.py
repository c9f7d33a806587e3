"""Whether a process id still names a running process: the test for files a dead process
left behind (worktrees, engine homes), which are named after the pid that made them."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True for this process, for a live process, and for one we may not signal."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
