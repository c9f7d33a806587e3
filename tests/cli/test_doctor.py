"""``pr-review-agent doctor``: against the simulator, with the fake ``claude`` (which
answers ``--version`` as the real one does) and a real store; every problem one line that
says what to do, and the exit status says whether there was one."""

from __future__ import annotations

import io
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from service.cli.doctor import doctor
from service.cli.main import main
from service.config.strict_yaml import load_config
from tests.fake_claude import Scenario
from tests.simulator import SimulatorTransport
from tests.simulator.harness import Harness, app_key_pair
from tests.webhook_env import write_config
from tests.worker_helpers import job_config


def config_file(tmp_path: Path, scenario: Scenario, **sections: dict[str, Any]) -> Path:
    path = write_config(tmp_path, server=sections.pop("server", {"host": "0.0.0.0"}),
                        github=sections.pop("github", None))
    document = yaml.safe_load(path.read_text())
    document["engine"] = {"command": scenario.command, **scenario.isolation_config,
                          **sections.pop("engine", {})}
    path.write_text(yaml.safe_dump(document))
    return path


def run(path: Path, harness: Harness, environ: dict[str, str]) -> tuple[int, list[str]]:
    out = io.StringIO()
    code = doctor(load_config(path, environ), str(path), environ,
                  clock=harness.world.clock.now, out=out,
                  transport=SimulatorTransport(harness.world))
    return code, out.getvalue().splitlines()


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}


def test_a_ready_install_has_no_problems(tmp_path: Path) -> None:
    harness = Harness.create()
    scenario = Scenario(tmp_path / "claude")
    path = config_file(tmp_path, scenario)
    code, lines = run(path, harness, {**base_env(), "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat-x"})
    assert code == 0, lines
    assert lines[-1] == "no problems found"
    by_what = {line.split(":", 1)[0].split(None, 1)[1]: line for line in lines[:-1]}
    assert by_what["engine"].startswith("ok      engine: 2.1.197 (Claude Code) at ")
    assert by_what["engine credential"] == "ok      engine credential: CLAUDE_CODE_OAUTH_TOKEN set"
    assert by_what["engine isolation"].startswith("ok      engine isolation: landlock")
    assert by_what["engine window"] == ("ok      engine window: 200,000 tokens (the window of "
                                        "Claude's models)")
    assert by_what["github"].startswith("ok      github: the App 'PR Reviewer' (pr-reviewer, "
                                        "id 4242) accepted the JWT")
    installation = f"installation {harness.installation.id} (acme)"
    assert by_what[installation] == (
        f"ok      {installation}: 2 repositories: acme/widgets, acme/gadgets")
    assert by_what["store"].startswith(f"ok      store: {tmp_path / 'state.db'} at schema "
                                       "version ") and by_what["store"].endswith("(this code's)")
    assert by_what["webhook"].startswith(
        "info    webhook: GitHub must deliver to http://localhost:8080/webhook")
    assert scenario.calls == 0  # --version runs no review


def test_every_problem_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    harness = Harness.create()
    scenario = Scenario(tmp_path / "claude")
    (tmp_path / "other.pem").write_text(_other_key())  # not the App's key
    path = config_file(tmp_path, scenario, engine={"command": "no-such-claude -p"},
                       server={"host": "127.0.0.1"},
                       github={"private_key_file": "other.pem"})
    code, lines = run(path, harness, base_env())
    assert code == 1
    problems = [line for line in lines if line.startswith("PROBLEM")]
    assert problems[0].startswith("PROBLEM engine: 'no-such-claude' is not on PATH: install "
                                  "Claude Code")
    assert problems[1].startswith("PROBLEM github: GitHub refused the App's JWT") and (
        "generate a new key in the App's settings" in problems[1])
    assert len(problems) == 2
    # What doctor cannot know is a warning that says so, never a problem.
    warnings = [line for line in lines if line.startswith("WARN")]
    assert warnings[0].startswith("WARN    engine credential: none of "
                                  "CLAUDE_CODE_OAUTH_TOKEN is set") and (
        "claude setup-token" in warnings[0] and "stand-in" in warnings[0])
    assert warnings[1].startswith("WARN    webhook: server.host is 127.0.0.1: GitHub reaches "
                                  "it only through a reverse proxy or tunnel")
    assert len(warnings) == 2
    assert lines[-1] == "2 problem(s) found, 2 warning(s)"


def test_the_development_setup_has_no_problem(tmp_path: Path) -> None:
    """DEVELOPMENT.md's walk-through: the simulator on loopback as GitHub, the fake
    ``claude`` needing no credential, the server on 127.0.0.1. Nothing there will fail,
    so doctor exits 0; the credential it cannot judge is a warning."""
    harness = Harness.create()
    scenario = Scenario(tmp_path / "claude")
    path = config_file(tmp_path, scenario, server={"host": "127.0.0.1"},
                       github={"api_url": "http://127.0.0.1:9999"})
    code, lines = run(path, harness, base_env())
    assert code == 0, lines
    assert not any(line.startswith("PROBLEM") for line in lines)
    assert [line.split(":")[0] for line in lines if line.startswith("WARN")] == [
        "WARN    engine credential"]
    assert lines[-1] == "no problems found, 1 warning(s)"


def _other_key() -> str:
    from tests.simulator.auth import generate_app_key

    private, _ = generate_app_key()
    assert private != app_key_pair()[0]
    return private


def test_an_app_installed_nowhere_and_a_listed_repository_outside_it(tmp_path: Path) -> None:
    harness = Harness.create()
    scenario = Scenario(tmp_path / "claude")
    path = config_file(tmp_path, scenario,
                       github={"repositories": ["acme/widgets", "acme/elsewhere"]})
    environ = {**base_env(), "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat-x"}
    code, lines = run(path, harness, environ)
    assert code == 1
    assert ("PROBLEM github.repositories: acme/elsewhere is not in any installation: add them "
            "to the App's installation, or remove them from the list") in lines
    harness.world.installations.clear()
    code, lines = run(path, harness, environ)
    assert code == 1
    assert any(line.startswith("PROBLEM installations: the App is installed nowhere: install it "
                               "on a repository at https://github.com/apps/pr-reviewer/")
               for line in lines)


def test_a_store_that_cannot_open_is_a_problem(tmp_path: Path) -> None:
    harness = Harness.create()
    scenario = Scenario(tmp_path / "claude")
    path = config_file(tmp_path, scenario)
    (tmp_path / "state.db").mkdir()  # a directory where the file should be
    code, lines = run(path, harness, {**base_env(), "CLAUDE_CODE_OAUTH_TOKEN": "x"})
    assert code == 1
    [store] = [line for line in lines if line.startswith("PROBLEM store")]
    assert "cannot be opened" in store and "permissions" in store


def test_the_command_says_registration_is_the_step_left(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "store": {"path": "state.db"}, "triggers": {},
        "budget": {"session_tokens": 100_000, "weekly_tokens": 1_000_000,
                   "max_run_tokens": 10_000}}))
    assert main(["doctor", "--config", str(path)]) == 1
    assert "the App is not registered yet" in capsys.readouterr().out
    path.write_text("budget: [")
    assert main(["doctor", "--config", str(path)]) == 2
    assert "problem(s)" in capsys.readouterr().err


@pytest.mark.anyio
async def test_the_window_an_openai_compatible_server_states_is_shown() -> None:
    from service.cli.doctor import check_windows
    from service.config.schema import EngineConfig

    served = httpx.MockTransport(lambda r: httpx.Response(200, json={"data": [
        {"id": "qwen", "max_model_len": 32768}]}) if r.url.path == "/v1/models"
        else httpx.Response(404))
    engine = EngineConfig(kind="openai_compatible", model="qwen",
                          api_url="http://127.0.0.1:8000/v1")
    config = replace(job_config(), engine=engine)
    (check,) = await check_windows(config, {}, transport=served)
    assert check.line() == ("ok      engine window: 32,768 tokens (the server's /v1/models "
                            "(max_model_len))")
    silent = httpx.MockTransport(lambda r: httpx.Response(404))
    (unknown,) = await check_windows(config, {}, transport=silent)
    assert unknown.status == "WARN" and "engine.context_tokens" in unknown.detail


@pytest.mark.anyio
async def test_each_routed_model_shows_its_window() -> None:
    from service.cli.doctor import check_windows
    from service.config.schema import EngineConfig, ModelRoute

    engine = EngineConfig(kind="anthropic", model="claude-sonnet-4-5", models=(
        ModelRoute(model="claude-haiku-4-5", max_prompt_tokens=20_000),
        ModelRoute(model="local-big", context_tokens=1_000_000)))
    checks = await check_windows(replace(job_config(), engine=engine), {})
    assert [c.line() for c in checks] == [
        "ok      engine window (claude-haiku-4-5): 200,000 tokens (the published window of "
        "this model)",
        "ok      engine window (claude-sonnet-4-5): 200,000 tokens (the published window of "
        "this model)",
        "ok      engine window (local-big): 1,000,000 tokens (engine.context_tokens)"]
