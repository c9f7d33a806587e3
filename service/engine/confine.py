"""The engine's launcher: confine this process with Landlock, then become the engine CLI.

Run as ``launcher_argv(POLICY) + ["--", *COMMAND]``. ``POLICY`` is JSON:
``{"read": [paths], "write": [paths]}``. The process restricts itself to those trees and
``exec``s ``COMMAND``, so the CLI starts already confined and so does every process it
spawns (``git``, ``rg``, ``ps``…). Python runs isolated (``-I``) with only this
service's own directory put on ``sys.path``: the child's working directory is the
worktree, which a pull request writes, and a ``service/`` package there must never be
the one imported. (Naming the directory also makes it work where the service runs from
source with ``PYTHONPATH``, which ``-I`` ignores.)

Before that it gives up every capability (a service run as root would otherwise hand
root's to the CLI), for itself and, by emptying the bounding set, for what it executes.

``POLICY`` with ``"probe": [paths]`` instead of a command confines itself the same way,
tries to open each path, and prints ``{"abi": N, "readable": [...]}``: the live proof,
run at startup and by ``check-config``, that the service's secrets are out of reach.

Exit codes: 126 when the process cannot be confined (it then runs nothing), 127 when the
command cannot be executed. This module imports only the standard library and
``landlock``, before anything is restricted.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from service.engine.landlock import READ, READ_WRITE, Rule, drop_capabilities, restrict

CANNOT_CONFINE: Final = 126
CANNOT_EXECUTE: Final = 127
#: The first words of this launcher's own error lines, so the engine can tell them apart.
MARK: Final = "pr-review-agent confine:"


#: The directory holding the ``service`` package this launcher belongs to.
_SERVICE_ROOT: Final = str(Path(__file__).resolve().parents[2])
_BOOTSTRAP: Final = ("import sys; sys.path.insert(0, sys.argv.pop(1)); "
                     "from service.engine.confine import main; sys.exit(main(sys.argv[1:]))")


def launcher_argv(policy: Mapping[str, object]) -> list[str]:
    """The argv that starts the launcher with ``policy``; append ``--`` and a command."""
    return [sys.executable, "-I", "-c", _BOOTSTRAP, _SERVICE_ROOT,
            json.dumps(policy, separators=(",", ":"))]


def _rules(policy: dict[str, object]) -> list[Rule]:
    def paths(key: str) -> list[str]:
        value = policy.get(key, [])
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            raise ValueError(f"policy {key!r} must be a list of paths")
        return value

    return ([Rule(p, READ) for p in paths("read")]
            + [Rule(p, READ_WRITE) for p in paths("write")])


def _probe(paths: Sequence[str]) -> list[str]:
    readable = []
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            continue
        os.close(fd)
        readable.append(path)
    return readable


def main(argv: Sequence[str]) -> int:
    """Confine, then exec the command (never returns) or answer the probe."""
    if not argv:
        print(f"{MARK} usage: confine POLICY -- COMMAND...", file=sys.stderr)
        return 2
    try:
        policy = json.loads(argv[0])
        if not isinstance(policy, dict):
            raise ValueError("the policy must be a JSON object")
        rules = _rules(policy)
    except ValueError as exc:
        print(f"{MARK} bad policy: {exc}", file=sys.stderr)
        return 2
    command = list(argv[2:]) if len(argv) > 1 and argv[1] == "--" else []
    probe = policy.get("probe")
    if not command and not isinstance(probe, list):
        print(f"{MARK} nothing to run", file=sys.stderr)
        return 2
    try:
        # Capabilities first: root's CAP_SYS_PTRACE would let it read the service's
        # /proc/<pid>/environ past Landlock's scoping, and a root exec regains them all.
        drop_capabilities()
        abi = restrict(rules)
    except OSError as exc:
        print(f"{MARK} cannot confine the engine: {exc.strerror or exc}", file=sys.stderr)
        return CANNOT_CONFINE
    if isinstance(probe, list):
        print(json.dumps({"abi": abi, "readable": _probe([str(p) for p in probe])}))
        return 0
    try:
        os.execvp(command[0], command)  # noqa: S606 - exec, not a shell: the point
    except OSError as exc:
        print(f"{MARK} cannot execute {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
    return CANNOT_EXECUTE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
