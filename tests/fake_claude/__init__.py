"""The fake ``claude`` executable (``tests/fake_claude/claude``) and scenario helpers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FAKE_CLAUDE = Path(__file__).with_name("claude")


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

    def call(self, n: int = 1) -> dict[str, Any]:
        """What invocation ``n`` recorded: argv, env, cwd, stdin, pid, pgid."""
        data: dict[str, Any] = json.loads((self.dir / f"call-{n}.json").read_text())
        return data

    @property
    def calls(self) -> int:
        counter = self.dir / "calls.count"
        return int(counter.read_text()) if counter.exists() else 0
