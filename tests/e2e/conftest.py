"""Fixtures for the end-to-end tests: a seeded simulator process, and ``serve`` processes
started on demand; every process a test started is stopped when it ends."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import (
    CREDENTIAL_SHAPES,
    WEBHOOK_SECRET,
    HarnessServe,
    SeededSimulator,
    kill_leftover_engines,
    review_steps,
    write_config,
    write_seed,
)
from tests.fake_claude import Scenario
from tests.kit.ports import free_port


@dataclass
class E2E:
    """One test's world: the simulator, the fake engine's scenario, the config, and the
    ``serve`` processes it started (all on one port and one store, one after another)."""

    tmp: Path
    sim: SeededSimulator
    port: int
    scenario: Scenario | None = None
    config: Path | None = None
    serves: list[HarnessServe] = field(default_factory=list)

    @property
    def service_dir(self) -> Path:
        return self.tmp / "service"

    @property
    def store_path(self) -> Path:
        return self.service_dir / "state.db"

    def configure(self, *calls: list[dict[str, Any]], **sections: dict[str, Any]) -> Path:
        """Write the scenario (one list of steps per fake ``claude`` call; default: one
        prompt review) and ``config.yaml``; returns the config's path."""
        self.service_dir.mkdir(exist_ok=True)
        self.scenario = Scenario(self.tmp / "claude", *(calls or (review_steps(),)))
        self.config = write_config(
            self.service_dir, api_url=self.sim.url, port=self.port, scenario=self.scenario,
            private_key_pem=self.sim.seeded.private_key_pem, **sections)
        return self.config

    def serve(self, *, role: str = "all", log_format: str | None = None,
              args: tuple[str, ...] = (), port: int | None = None) -> HarnessServe:
        """Start ``serve --role ROLE`` with the current config; stderr in its own file."""
        if self.config is None:
            self.configure()
        assert self.config is not None
        log = self.tmp / f"serve-{len(self.serves) + 1}-{role}.log"
        process = HarnessServe(self.config, port or self.port, log, role=role,
                               log_format=log_format, args=args)
        self.serves.append(process)
        return process

    def db(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        """Rows from the service's store (a read of its own, as an operator would)."""
        with sqlite3.connect(self.store_path) as conn:
            rows: list[tuple[Any, ...]] = conn.execute(sql, params).fetchall()
        conn.close()
        return rows

    def assert_no_secrets(self) -> None:
        """No log of any ``serve`` this test started holds the webhook secret, the App's
        private key, an installation token or a JWT (the shapes the simulator mints)."""
        key_lines = self.sim.seeded.private_key_pem.splitlines()[1:-1]
        assert CREDENTIAL_SHAPES[0].fullmatch(self.sim.token())  # the shape is the real one
        for process in self.serves:
            text = process.text()
            assert WEBHOOK_SECRET not in text, process.log
            assert "PRIVATE KEY" not in text and not any(line in text for line in key_lines)
            for shape in CREDENTIAL_SHAPES:
                assert not shape.search(text), (process.log, shape.pattern)

    def close(self) -> None:
        for process in self.serves:
            process.close()
        if self.scenario is not None:
            kill_leftover_engines(self.scenario)
        self.sim.close()


@pytest.fixture
def make_e2e(tmp_path: Path) -> Iterator[Callable[..., E2E]]:
    """``make_e2e(pr_state="open", app=True)``: a simulator seeded with pull request #1 in
    that state (and, with ``app``, the App and its installation)."""
    made: list[E2E] = []

    def make(*, pr_state: str = "open", app: bool = True) -> E2E:
        seeded = write_seed(tmp_path / "seed", pr_state=pr_state, app=app)
        e2e = E2E(tmp=tmp_path, sim=SeededSimulator(seeded, tmp_path), port=free_port())
        made.append(e2e)
        return e2e

    yield make
    for e2e in made:
        e2e.close()


@pytest.fixture
def e2e(make_e2e: Callable[..., E2E]) -> E2E:
    """A simulator with pull request #1 open."""
    return make_e2e()
