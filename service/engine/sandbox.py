"""The engine's second wall: what the ``claude`` child may open, and the proof that it holds.

The first wall is the CLI's own permission check (``claude_code.claude_argv``): read-only
tools allowed only beneath the worktree. This one does not trust the CLI at all. With
``engine.isolation: landlock`` (the default) every engine run is started through
``service.engine.confine``, which asks the kernel (Landlock) to confine the process to:

- the worktree, read-only;
- a throwaway HOME made for the run (no credentials file: the token is an environment
  variable), read-write, and removed afterwards;
- the CLI's own install, found from ``engine.command`` (and its ``#!`` interpreter);
- the system's programs and libraries (``/usr``, ``/lib``…), CA certificates and the few
  files of ``/etc`` that name resolution and TLS read, ``/proc`` (the CLI's runtime
  needs it; Landlock's scoping keeps it from the service's own ``/proc/<pid>`` entries)
  and the ``/dev`` entries every program opens;
- ``engine.isolation_read_paths`` / ``engine.isolation_write_paths``, for a wrapper.

Everything else — the App's key, the webhook secret, the config, the store, the git
cache, the service user's ``~/.claude`` — cannot be opened, whatever the CLI's flags.

Why Landlock rather than a second Unix user or a mount namespace: it needs no privilege
(a second user needs ``CAP_SETUID`` in the service, which Docker and Kubernetes do not
give a non-root process; a namespace needs unprivileged user namespaces, which their
default seccomp profiles block), it covers every process the CLI starts, and nothing
inside can undo it. Docker (23+) and containerd allow its three system calls by default.

``verify`` proves it on the running kernel: a confined probe tries to open each protected
path, and the service refuses to start an engine that could read one.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from service.config.schema import Isolation
from service.engine.confine import CANNOT_CONFINE, MARK, launcher_argv
from service.runtime.pids import alive

#: Read (and execute) beneath these, when they exist.
SYSTEM_READ: Final = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/crypto-policies",
    "/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
    "/etc/gai.conf", "/etc/localtime", "/etc/ld.so.cache", "/etc/ld.so.conf",
    "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/os-release", "/etc/mime.types",
    "/proc", "/sys/fs/cgroup", "/sys/devices/system/cpu", "/sys/devices/system/node",
    "/sys/kernel/mm/transparent_hugepage",
    "/dev/urandom", "/dev/random", "/dev/zero", "/dev/full",
)
SYSTEM_WRITE: Final = ("/dev/null",)
HOME_PREFIX: Final = "pr-review-engine-"
PROBE_TIMEOUT: Final = 30.0


class SandboxError(RuntimeError):
    """The engine cannot be confined as configured; the message says what to change."""


def install_roots(executable: str, search_path: str | None) -> tuple[str, ...]:
    """The directories a command needs to run: its install (as found and as resolved), and
    the same for a ``#!`` interpreter (``#!/usr/bin/env node`` looks ``node`` up on
    ``search_path``).

    A program in ``PREFIX/bin`` with a ``PREFIX/lib`` beside it (a venv, ``/usr/local``,
    a Node install) gets ``PREFIX``, unless ``PREFIX`` is ``/`` (``/bin/sh``); any other
    program gets its own directory.
    """
    found = shutil.which(executable, path=search_path)
    if found is None:
        return ()
    real = Path(os.path.realpath(found))
    # Both the path as found (a venv's bin/python is a link to the base interpreter, and
    # the venv is what makes it a venv) and the file it resolves to.
    roots = [_root_of(Path(os.path.abspath(found))), _root_of(real)]
    interpreter = _interpreter(real)
    if interpreter is not None:
        if Path(interpreter[0]).name == "env" and len(interpreter) > 1:
            interpreter = interpreter[1:]
        located = shutil.which(interpreter[0], path=search_path)
        if located is not None:
            roots += [_root_of(Path(os.path.abspath(located))),
                      _root_of(Path(os.path.realpath(located)))]
    return tuple(dict.fromkeys(roots))


def _root_of(real: Path) -> str:
    parent = real.parent
    prefix = parent.parent
    # /bin's "prefix" is the root itself: never that (it would open everything).
    if parent.name == "bin" and prefix != Path(prefix.anchor) and (prefix / "lib").is_dir():
        return str(prefix)
    return str(parent)


def _interpreter(path: Path) -> list[str] | None:
    try:
        with path.open("rb") as handle:
            head = handle.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
    return words or None


@dataclass(frozen=True)
class Sandbox:
    """How engine children are confined. ``home_root`` holds their throwaway HOMEs."""

    isolation: Isolation = "landlock"
    read_paths: tuple[str, ...] = ()
    write_paths: tuple[str, ...] = ()
    home_root: Path | None = None

    def policy(self, *, roots: Sequence[str], worktree: Path, home: Path) -> dict[str, list[str]]:
        """The launcher's policy for one run (see the module docstring)."""
        return {
            "read": list(dict.fromkeys([*SYSTEM_READ, *roots, *self.read_paths,
                                        str(worktree)])),
            "write": list(dict.fromkeys([*SYSTEM_WRITE, *self.write_paths, str(home)])),
        }

    def wrap(self, argv: Sequence[str], *, roots: Sequence[str], worktree: Path,
             home: Path) -> list[str]:
        """``argv`` as it is run: through the launcher, unless isolation is off."""
        if self.isolation == "none":
            return list(argv)
        policy = self.policy(roots=roots, worktree=worktree, home=home)
        return [*launcher_argv(policy), "--", *argv]

    def make_home(self) -> Path:
        """A fresh, empty HOME for one engine run (``OSError`` on a full or read-only
        disk); ``remove_home`` deletes it when the run ends."""
        base = self.home_root or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = base / f"{HOME_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        path.mkdir(mode=0o700)
        (path / "tmp").mkdir(mode=0o700)
        return path

    @staticmethod
    def remove_home(path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def sweep_homes(self) -> list[Path]:
        """Delete HOMEs left by processes that died mid-run; returns what was removed."""
        base = self.home_root
        removed: list[Path] = []
        if base is None or not base.is_dir():
            return removed
        for entry in base.iterdir():
            if not entry.name.startswith(HOME_PREFIX):
                continue
            pid = entry.name[len(HOME_PREFIX):].split("-", 1)[0]
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
        return removed


@dataclass(frozen=True)
class Verified:
    """What ``verify`` established: the kernel's Landlock ABI and the paths it checked."""

    abi: int | None
    checked: tuple[str, ...]

    def describe(self) -> str:
        if self.abi is None:
            return "engine isolation: none (the engine can read whatever this user can)"
        return (f"engine isolation: landlock (ABI {self.abi}); verified that the engine "
                f"cannot open {len(self.checked)} protected path(s)")


def verify(sandbox: Sandbox, *, roots: Sequence[str], protected: Sequence[Path],
           service_pid: int | None = None) -> Verified:
    """Prove that a confined engine cannot open any of ``protected``.

    Checks first that no allowed tree contains a protected path (a config kept under
    ``/usr``, say), then runs the launcher's probe on this kernel. Raises ``SandboxError``
    with what to change; with ``isolation: none`` it checks nothing.
    """
    if sandbox.isolation == "none":
        return Verified(None, ())
    existing = [str(p) for p in dict.fromkeys(Path(os.path.abspath(p)) for p in protected)
                if p.exists()]
    if service_pid is not None:
        existing.append(f"/proc/{service_pid}/environ")
    # The probe's HOME is a temporary directory, not one under ``home_root``: what is
    # proven is what the policy shuts out, wherever the run's HOME will be.
    with tempfile.TemporaryDirectory(prefix=HOME_PREFIX + "probe-") as scratch:
        home = Path(scratch)
        worktree = home / "tmp"
        worktree.mkdir()
        policy = sandbox.policy(roots=roots, worktree=worktree, home=home)
        for path in existing:
            if path.startswith("/proc/"):
                continue  # /proc is open to the engine; Landlock's ptrace scoping guards it
            holder = tree_holding(path, [*policy["read"], *policy["write"]])
            if holder is not None:
                raise SandboxError(
                    f"the engine would be allowed to read {path}: it lies under {holder}, "
                    "which the engine's sandbox opens; keep secrets, the config and the "
                    "store outside it")
        argv = launcher_argv({**policy, "probe": existing})
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False,  # noqa: S603
                                  timeout=PROBE_TIMEOUT, cwd=home, env=_probe_env(home))
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxError(f"the engine's sandbox could not be tested: {exc}") from None
    if done.returncode == CANNOT_CONFINE:
        reason = done.stderr.strip().removeprefix(MARK).strip()
        raise SandboxError(
            f"{reason}. The engine cannot run confined on this host; run on Linux 5.13+ "
            "with Landlock enabled (Docker 23+ and containerd allow it by default), or set "
            "engine.isolation: none to run it unconfined")
    try:
        answer = json.loads(done.stdout)
        abi, readable = int(answer["abi"]), [str(p) for p in answer["readable"]]
    except (ValueError, KeyError, TypeError):
        raise SandboxError("the engine's sandbox probe failed: "
                           f"{(done.stderr or done.stdout).strip()[:300]}") from None
    if readable:
        raise SandboxError(f"a confined engine could still open {', '.join(readable)}")
    return Verified(abi, tuple(existing))


def tree_holding(path: str, trees: Sequence[str]) -> str | None:
    """The tree of ``trees`` that holds ``path`` (links resolved), or None."""
    real = os.path.realpath(path)
    for tree in trees:
        top = os.path.realpath(tree)
        if real == top or real.startswith(top.rstrip("/") + "/"):
            return tree
    return None


def _probe_env(home: Path) -> dict[str, str]:
    env = {"HOME": str(home), "LANG": "C"}
    if "PATH" in os.environ:
        env["PATH"] = os.environ["PATH"]
    return env

