"""The kernel's Landlock, as the launcher uses it: the ABI this kernel has, every right an
ABI handles (so that every right not granted is denied), and a confinement that holds for
the process and what it starts — run in a child, never in the test process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from service.engine import landlock
from tests.engine.confinement import LANDLOCK_ABI, needs_landlock


def test_each_abi_handles_the_rights_it_knows() -> None:
    first = landlock.handled_fs(1)
    assert first & landlock.READ == landlock.READ
    assert not first & (landlock.REFER | landlock.TRUNCATE | landlock.IOCTL_DEV)
    assert landlock.handled_fs(2) == first | landlock.REFER
    assert landlock.handled_fs(3) == first | landlock.REFER | landlock.TRUNCATE
    assert landlock.handled_fs(6) == landlock.handled_fs(5) == (
        landlock.handled_fs(3) | landlock.IOCTL_DEV)


@needs_landlock
def test_the_kernel_reports_its_abi() -> None:
    assert landlock.abi_version() == LANDLOCK_ABI and LANDLOCK_ABI is not None
    assert LANDLOCK_ABI >= 1


@needs_landlock
def test_a_restricted_child_reads_only_beneath_its_rules(tmp_path: Path) -> None:
    allowed, denied = tmp_path / "allowed", tmp_path / "denied"
    allowed.mkdir()
    denied.mkdir()
    (allowed / "a.txt").write_text("yes")
    (denied / "b.txt").write_text("no")
    code = f"""
import sys
from service.engine import landlock
rules = [landlock.Rule(p, landlock.READ) for p in sys.path + ["/usr", "/lib", "/lib64",
         "/etc", {str(allowed)!r}] if p]
landlock.restrict(rules)
print(open({str(allowed / "a.txt")!r}).read())
try:
    open({str(denied / "b.txt")!r}).read()
    print("READ")
except PermissionError:
    print("DENIED")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.stdout.split() == ["yes", "DENIED"], done.stderr
