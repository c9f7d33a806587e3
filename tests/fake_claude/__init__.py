"""The fake ``claude`` executable (``tests/fake_claude/claude``) and scenario helpers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from service.engine.sandbox import Sandbox

FAKE_CLAUDE = Path(__file__).with_name("claude")
_TESTS = Path(__file__).resolve().parents[1]


def engine_isolation(writable: Path) -> dict[str, list[str]]:
    """``engine`` config keys that open the Landlock sandbox just enough for the project's
    fakes: their scripts (this package and the chaos wrapper) to read, ``writable`` for
    what they record. Everything else stays closed, as in production."""
    return {"isolation_read_paths": [str(FAKE_CLAUDE.parent), str(_TESTS / "chaos")],
            "isolation_write_paths": [str(writable)]}


class Scenario:
    """A scenario file for the fake, plus what its invocations recorded."""

    def __init__(self, directory: Path, *calls: list[dict[str, Any]]) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "scenario.json"
        self.path.write_text(json.dumps({
            "record_dir": str(self.dir), "calls": [{"steps": steps} for steps in calls]}))

    @property
    def command(self) -> str:
        """The engine's ``command``: the fake, told which scenario to play.

        Run by this interpreter rather than through its ``#!/usr/bin/env python3`` line: on
        a machine where ``python3`` is a version-manager shim (pyenv), the shim adds its own
        variables to the environment, which would hide what the engine really passed.
        """
        return f"{sys.executable} {FAKE_CLAUDE} --scenario {self.path}"

    @property
    def sandbox(self) -> Sandbox:
        """The engine's Landlock sandbox, opened just enough for the fake: its own script
        (read) and this scenario's directory (it records each invocation there)."""
        return Sandbox(read_paths=(str(FAKE_CLAUDE.parent),), write_paths=(str(self.dir),))

    @property
    def isolation_config(self) -> dict[str, list[str]]:
        """The same opening as ``engine`` config keys, for a service run from a file."""
        return engine_isolation(self.dir)

    def call(self, n: int = 1) -> dict[str, Any]:
        """What invocation ``n`` recorded: argv, env, cwd, stdin, pid, pgid."""
        data: dict[str, Any] = json.loads((self.dir / f"call-{n}.json").read_text())
        return data

    @property
    def calls(self) -> int:
        counter = self.dir / "calls.count"
        return int(counter.read_text()) if counter.exists() else 0
