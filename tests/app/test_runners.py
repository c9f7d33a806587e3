"""What the runners check before a worker may start an engine: its sandbox proven on this
host, an engine that runs no child needing none, and a sandbox that would open a secret
refused with what to change. (The runners' loops run under the daemon:
tests/app/test_daemon.py, tests/faults/ and tests/e2e/.)"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import pytest

from service.app.runners import engine_isolation_problem
from service.config.schema import Config
from service.config.strict_yaml import load_config
from tests.engine.confinement import needs_landlock
from tests.webhook_env import write_config

PATH = {"PATH": "/usr/bin:/bin"}


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path), {})


@needs_landlock
def test_the_sandbox_is_proven_before_an_engine_may_start(
        config: Config, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="service.app.runners"):
        assert engine_isolation_problem(config, str(tmp_path / "config.yaml"), PATH) is None
    assert any("verified that the engine cannot open" in r.getMessage()
               for r in caplog.records)


def test_a_sandbox_that_would_open_a_secret_is_refused_with_what_to_change(
        config: Config, tmp_path: Path) -> None:
    leaky = replace(config, engine=replace(config.engine, isolation_read_paths=(str(tmp_path),)))
    problem = engine_isolation_problem(leaky, str(tmp_path / "config.yaml"), PATH)
    assert problem is not None
    assert problem.startswith(f"the engine would be allowed to read {tmp_path}/")
    assert problem.endswith("keep secrets, the config and the store outside it")


def test_no_isolation_is_allowed_but_said_and_an_http_engine_needs_none(
        config: Config, caplog: pytest.LogCaptureFixture) -> None:
    unconfined = replace(config, engine=replace(config.engine, isolation="none"))
    with caplog.at_level(logging.INFO, logger="service.app.runners"):
        assert engine_isolation_problem(unconfined, None, PATH) is None
    assert any(r.levelno == logging.WARNING and "engine.isolation is none" in r.getMessage()
               for r in caplog.records)
    caplog.clear()
    http = replace(config, engine=replace(config.engine, kind="anthropic", model="m"))
    with caplog.at_level(logging.INFO, logger="service.app.runners"):
        assert engine_isolation_problem(http, None, {}) is None
    assert caplog.records == []
