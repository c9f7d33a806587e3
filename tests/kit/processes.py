"""The two processes an out-of-process test starts: the standalone simulator and ``serve``.

- ``SimulatorProcess``: ``python -m tests.simulator --port 0`` (``--state`` a seeded
  world, ``--activity`` the ``/_simulator/activity/`` routes a driver acts through), its
  base URL read from the first line it prints, ready once ``/_simulator/health`` answers.
- ``ServeProcess``: ``python -m service serve --config F --role R``, its stderr (the JSON
  log lines a test reads) in a file of the test's own.

Every test that runs either goes through these, so that how they are started, waited for
and stopped is written once. Each wait is bounded by the process being alive and by
``tests.kit.waiting``'s ceiling, never by a figure near the nominal time.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from tests.kit.paths import CHECKOUT
from tests.kit.waiting import alive, wait_for

__all__ = ["ServeProcess", "SimulatorProcess", "log_records"]


def log_records(text: str) -> Iterator[dict[str, Any]]:
    """The JSON log records in ``text`` (a line torn by a kill, or not JSON, is skipped)."""
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                yield record


def _stop(process: subprocess.Popen[bytes], sig: int | None, grace: float) -> int:
    """Signal ``process`` (terminate when ``sig`` is None) and reap it; its exit code. A
    process that outlives ``grace`` seconds is killed."""
    if process.poll() is None:
        if sig is None:
            process.terminate()
        else:
            process.send_signal(sig)
        try:
            return process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    return process.wait()


class SimulatorProcess:
    """The standalone simulator on a free loopback port, in ``directory``."""

    def __init__(self, directory: Path, *, state: Path | None = None,
                 activity: bool = False, name: str = "simulator") -> None:
        self._out = directory / f"{name}.stdout"
        self._err = directory / f"{name}.stderr"
        argv = [sys.executable, "-m", "tests.simulator", "--port", "0"]
        if state is not None:
            argv += ["--state", str(state)]
        if activity:
            argv.append("--activity")
        with self._out.open("wb") as out, self._err.open("wb") as err:
            self.process = subprocess.Popen(argv, cwd=CHECKOUT, stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=err)
        try:
            self.url: str = wait_for("the simulator's base URL", self._printed_url,
                                     alive=alive(self.process), on_timeout=self.stderr)
            self.client = httpx.Client(base_url=self.url, timeout=10)
            wait_for("the simulator to answer", self._healthy, alive=alive(self.process),
                     on_timeout=self.stderr)
        except BaseException:
            _stop(self.process, None, 10)
            raise

    def stderr(self) -> str:
        return self._err.read_text(errors="replace")

    def _printed_url(self) -> str | None:
        first = self._out.read_text().partition("\n")
        return first[0].strip() if first[1] else None

    def _healthy(self) -> bool:
        try:
            return self.client.get("/_simulator/health").status_code == 200
        except httpx.TransportError:
            return False

    def alive(self) -> str | None:
        """None while the simulator runs, else how it ended (for ``wait_for``)."""
        return alive(self.process)()

    def close(self) -> None:
        """Stop it (SIGTERM, then SIGKILL after 10 s)."""
        self.client.close()
        _stop(self.process, None, 10)


class ServeProcess:
    """``python -m service serve --config CONFIG --role ROLE``, its stderr in ``log``.

    ``client`` talks to ``url`` with ``headers`` on every request (the admin token a
    harness's config names)."""

    def __init__(self, config: Path, log: Path, *, url: str, role: str = "all",
                 log_format: str | None = None, args: tuple[str, ...] = (),
                 headers: Mapping[str, str] | None = None, cwd: Path = CHECKOUT) -> None:
        self.config = config
        self.url = url
        self.log = log
        argv = [sys.executable, "-m", "service", "serve", "--config", str(config),
                "--role", role]
        if log_format is not None:
            argv += ["--log-format", log_format]
        argv += args
        with log.open("ab") as err:
            self.process = subprocess.Popen(
                argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.client = httpx.Client(base_url=url, timeout=5, headers=dict(headers or {}))

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> list[dict[str, Any]]:
        """Every JSON log record written so far."""
        return list(log_records(self.text()))

    def messages(self, needle: str) -> Iterator[dict[str, Any]]:
        return (line for line in self.lines() if needle in line["message"])

    def alive(self) -> str | None:
        """None while serve runs, else how it ended (for ``wait_for``'s ``alive``)."""
        return alive(self.process)()

    def answers(self) -> dict[str, Any] | None:
        """The ``/healthz`` body (whatever its status), or None while nothing answers."""
        try:
            body: dict[str, Any] = self.client.get("/healthz", timeout=2).json()
        except (httpx.TransportError, ValueError):
            return None
        return body

    def healthz(self) -> dict[str, Any] | None:
        """``answers()``, failing at once when serve has exited."""
        if self.process.poll() is not None:
            raise AssertionError(f"serve exited with {self.process.returncode}:\n{self.text()}")
        return self.answers()

    def wait_ready(self, *, polled: bool = True) -> dict[str, Any]:
        """Until ``/healthz`` answers (and, with ``polled``, a poll cycle has succeeded)."""
        def ready() -> dict[str, Any] | None:
            body = self.answers()
            if body is None or (polled and body["checks"]["poller"].get("last_cycle_at")
                                is None):
                return None
            return body
        return wait_for("serve to be ready", ready, alive=self.alive,
                        on_timeout=lambda: self.text()[-4000:])

    def signal(self, number: int) -> None:
        self.process.send_signal(number)

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self, sig: int, *, grace: float = 60) -> int:
        """Send ``sig`` and reap serve (killed after ``grace`` s); its exit code."""
        return _stop(self.process, sig, grace)

    def close(self) -> None:
        """Kill serve if it still runs, and reap it."""
        self.client.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
