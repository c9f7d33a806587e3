"""Linux Landlock through its three system calls: a process confines its own file access.

Landlock (Linux 5.13+) lets an unprivileged process give up access to every file outside
the trees it names, for itself and every process it starts afterwards; nothing can undo
it. The engine's launcher (``service.engine.confine``) calls ``restrict`` just before it
executes the CLI, so the CLI, and anything it runs, can open only the worktree, its own
throwaway HOME, the CLI's install and the system's libraries.

This module is the whole kernel interface, written against ``<linux/landlock.h>`` with
``ctypes`` (no dependency to install, and the launcher must stay import-light). It imports
nothing from the service.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

# x86_64, aarch64 and every other architecture with the generic syscall table share these.
_SYS_CREATE_RULESET: Final = 444
_SYS_ADD_RULE: Final = 445
_SYS_RESTRICT_SELF: Final = 446
_CREATE_RULESET_VERSION: Final = 1 << 0
_RULE_PATH_BENEATH: Final = 1
_PR_SET_NO_NEW_PRIVS: Final = 38
_PR_CAPBSET_DROP: Final = 24
_LINUX_CAPABILITY_VERSION_3: Final = 0x20080522

# Filesystem rights (LANDLOCK_ACCESS_FS_*), and the ABI that introduced the later ones.
EXECUTE: Final = 1 << 0
WRITE_FILE: Final = 1 << 1
READ_FILE: Final = 1 << 2
READ_DIR: Final = 1 << 3
REMOVE_DIR: Final = 1 << 4
REMOVE_FILE: Final = 1 << 5
MAKE_CHAR: Final = 1 << 6
MAKE_DIR: Final = 1 << 7
MAKE_REG: Final = 1 << 8
MAKE_SOCK: Final = 1 << 9
MAKE_FIFO: Final = 1 << 10
MAKE_BLOCK: Final = 1 << 11
MAKE_SYM: Final = 1 << 12
REFER: Final = 1 << 13       # ABI 2
TRUNCATE: Final = 1 << 14    # ABI 3
IOCTL_DEV: Final = 1 << 15   # ABI 5
# Scopes (ABI 6): no signals to, and no abstract sockets of, processes outside the domain.
SCOPE_ABSTRACT_UNIX_SOCKET: Final = 1 << 0
SCOPE_SIGNAL: Final = 1 << 1

_ABI1_FS: Final = (EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE
                   | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK
                   | MAKE_SYM)
#: The rights a rule on a plain file (not a directory) may carry.
_FILE_RIGHTS: Final = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

#: Read a tree: open files for reading, list directories, run programs in it.
READ: Final = READ_FILE | READ_DIR | EXECUTE
#: Everything, in a tree the confined process owns (its HOME).
READ_WRITE: Final = -1  # resolved against the ABI in ``handled_fs``


class LandlockUnavailable(OSError):
    """The kernel cannot confine this process (too old, Landlock not enabled, blocked)."""


def handled_fs(abi: int) -> int:
    """Every filesystem right this ABI knows: all of them are denied unless a rule allows."""
    rights = _ABI1_FS
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; ``LandlockUnavailable`` says why there is none."""
    if platform.system() != "Linux":
        raise LandlockUnavailable(errno.ENOSYS, f"Landlock needs Linux, not {platform.system()}")
    libc = _libc()
    version = int(libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0),
                               ctypes.c_uint32(_CREATE_RULESET_VERSION)))
    if version < 0:
        code = ctypes.get_errno()
        reason = {
            errno.ENOSYS: "the kernel has no Landlock (Linux 5.13 or later is needed)",
            errno.EOPNOTSUPP: "Landlock is built in but not enabled (add it to the lsm= boot "
                              "parameter)",
            errno.EPERM: "a seccomp filter (a container runtime's profile) blocks Landlock",
        }.get(code, os.strerror(code))
        raise LandlockUnavailable(code, reason)
    return version


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("handled_access_fs", ctypes.c_uint64),
                ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64))


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


@dataclass(frozen=True)
class Rule:
    """Allow ``access`` (``READ`` or ``READ_WRITE``) beneath ``path``."""

    path: str
    access: int


def restrict(rules: Iterable[Rule]) -> int:
    """Confine this process (and its future children) to ``rules``; returns the ABI used.

    A rule whose path does not exist is skipped: a policy names ``/lib64`` or ``/lib32``
    on every machine and only some have them. Raises ``LandlockUnavailable`` when the
    kernel cannot confine, and ``OSError`` when a rule cannot be added; in both cases the
    process is left unconfined, so the caller must not go on to run anything.
    """
    abi = abi_version()
    libc = _libc()
    fs = handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=0,
                        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 8  # ABI < 4 knows only the first field
    ruleset = int(libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                               ctypes.c_uint32(0)))
    if ruleset < 0:
        code = ctypes.get_errno()
        raise LandlockUnavailable(code, f"landlock_create_ruleset: {os.strerror(code)}")
    try:
        for rule in rules:
            _add_rule(libc, ruleset, rule, fs)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) != 0:
            code = ctypes.get_errno()
            raise LandlockUnavailable(code, f"landlock_restrict_self: {os.strerror(code)}")
    finally:
        os.close(ruleset)
    return abi


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32))


def drop_capabilities() -> None:
    """Give up every capability, now and across ``exec`` (an empty bounding set leaves a
    root ``exec`` nothing to regain). A process that has none loses nothing."""
    libc = _libc()
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        # EPERM without CAP_SETPCAP: then nothing was in the set to drop that matters,
        # since a process without it cannot have gained capabilities to lose.
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = _CapHeader(version=_LINUX_CAPABILITY_VERSION_3, pid=0)
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def _add_rule(libc: ctypes.CDLL, ruleset: int, rule: Rule, fs: int) -> None:
    try:
        fd = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        access = fs if rule.access == READ_WRITE else rule.access & fs
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= _FILE_RIGHTS
        attr = _PathBeneathAttr(allowed_access=access, parent_fd=fd)
        if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(attr),
                        ctypes.c_uint32(0)) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"landlock_add_rule {rule.path}: {os.strerror(code)}")
    finally:
        os.close(fd)
