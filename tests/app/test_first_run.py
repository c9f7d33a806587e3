"""``pr-review-agent serve`` on a fresh machine: the real process, from nothing to serving.

With no config file, ``serve`` writes one from the template and serves the registration
page; with a config that has no App yet, it registers the App (here against the standalone
simulator, which plays GitHub and its conversion endpoint), then serves normally in the
same process: the webhook secret it just saved verifies deliveries.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
import yaml

from service.cli.main import main
from service.config.strict_yaml import load_config
from tests.kit.paths import CHECKOUT
from tests.kit.ports import free_port
from tests.kit.processes import ServeProcess, SimulatorProcess
from tests.kit.waiting import CEILING, alive
from tests.kit.waiting import wait_for as kit_wait
from tests.simulator import WebhookSender

ROOT = CHECKOUT
#: How long a process is given to stop (a hang, not slowness, fails it).
DEADLINE = CEILING


@pytest.fixture(autouse=True)
def _keep_logging() -> Iterator[None]:
    """``serve`` in process installs its own root handler; put pytest's back after."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)



def wait_for(pattern: str, log: Path, process: subprocess.Popen[bytes]) -> re.Match[str]:
    return kit_wait(f"{pattern!r} in serve's log", lambda: re.search(pattern, log.read_text()),
                    alive=alive(process), interval=0.05, on_timeout=log.read_text)


def health(url: str) -> tuple[int, dict[str, Any]]:
    try:
        response = httpx.get(f"{url}/healthz", timeout=2)
    except httpx.TransportError:
        return 0, {}
    return response.status_code, response.json()


def stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=DEADLINE)


@pytest.fixture
def simulator(tmp_path: Path) -> Iterator[str]:
    """The standalone simulator; its base URL."""
    sim = SimulatorProcess(tmp_path)
    try:
        yield sim.url
    finally:
        sim.close()


def spawn(argv: list[str], err: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=err)


def test_with_no_config_serve_writes_one_and_serves_the_registration_page(
        tmp_path: Path) -> None:
    port = free_port()
    path = tmp_path / "fresh" / "config.yaml"  # not even its directory exists
    log = tmp_path / "stderr.log"
    # The real CLI; only the template's port is moved off 8080 for the test.
    program = ("from service.app.setup import files; files._HEADER = files._HEADER.replace("
               f"'port: 8080', 'port: {port}').replace('host: 0.0.0.0', 'host: 127.0.0.1'); "
               "from service.cli.main import main; raise SystemExit(main())")
    with log.open("wb") as err, spawn(
            ["-c", program, "serve", "--config", str(path), "--log-format", "text"],
            err) as process:
        try:
            link = wait_for(r"(http://\S+)/\?key=(\S+)", log, process)
            url = f"http://127.0.0.1:{port}"
            assert link[1] == url  # no --public-url: http://{host}:{port}
            page = httpx.get(f"{url}/", params={"key": link[2]}, timeout=5)
            refused = httpx.get(f"{url}/", timeout=5)
            status, body = health(url)
            code = stop(process)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert page.status_code == 200 and "Register the GitHub App" in page.text
    assert refused.status_code == 403
    assert (status, body["status"]) == (503, "registration_needed")
    assert code == 0
    text = log.read_text()
    assert f"Created {path} from the template" in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "REVIEW THIS SECTION" in path.read_text()
    assert main(["check-config", str(path)]) == 3
    # The admin routes are closed from the first start: a token of its own, 0600, named
    # by the config and said once where it is.
    token = path.parent / "secrets" / "admin-token"
    assert stat.S_IMODE(token.stat().st_mode) == 0o600 and len(token.read_text().strip()) >= 32
    assert "admin_token_file: secrets/admin-token" in path.read_text()
    assert f"The admin token for /status, /budget and /metrics is in {token}" in text
    assert token.read_text().strip() not in text


def test_serve_registers_the_app_then_serves_it(tmp_path: Path, simulator: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "github": {"api_url": simulator},
        "server": {"host": "127.0.0.1", "port": port},
        "triggers": {},
        "budget": {"session_tokens": 88000, "weekly_tokens": 1500000,
                   "max_run_tokens": 30000},
    }))
    log = tmp_path / "stderr.log"
    serve = ServeProcess(path, log, url=url, role="web", args=("--public-url", url))
    process = serve.process
    try:
        link = wait_for(r"/\?key=(\S+)", log, process)
        form = httpx.post(f"{url}/setup/register", timeout=5,
                          data={"key": link[1], "owner": "org", "org": "acme"})
        action = unescape(re.search(r"action='([^']+)'", form.text)[1])  # type: ignore[index]
        manifest = json.loads(unescape(
            re.search(r"name=manifest value='([^']+)'", form.text)[1]))  # type: ignore[index]
        # GitHub (the simulator) creates the App and redirects the browser back.
        code = httpx.post(f"{simulator}/_simulator/manifest-codes",
                          json={"manifest": manifest}, timeout=5).json()["code"]
        [state] = parse_qs(urlsplit(action).query)["state"]
        done = httpx.get(f"{url}/setup/callback", params={"code": code, "state": state},
                         timeout=10)
        # The same process now serves the App: /healthz turns into the service's.
        def authenticated() -> tuple[int, dict[str, Any]] | None:
            status, body = health(url)
            ok = body.get("checks", {}).get("github_auth", {}).get("last_success_at")
            return (status, body) if ok else None
        status, body = kit_wait("the service to authenticate", authenticated,
                                alive=alive(process), on_timeout=log.read_text)
        config = load_config(path, {})
        secret = config.github.webhook_secrets[0].reveal()

        async def ping() -> httpx.Response:
            async with httpx.AsyncClient(base_url=url) as client:
                sender = WebhookSender(client, url="/webhook", secret=secret,
                                       app_id=config.github.app_id)
                return await sender.send("ping", {"zen": "Keep it logically awesome.",
                                                  "hook_id": 1})

        pinged = anyio.run(ping)
        code_at_exit = stop(process)
    finally:
        serve.close()
    assert urlsplit(action).path == "/organizations/acme/settings/apps/new"
    assert manifest["hook_attributes"]["url"] == f"{url}/webhook"
    assert done.status_code == 200, done.text
    # The simulator serves its own pages: the install link leads to them, not github.com.
    assert re.search(rf"href='{re.escape(simulator)}/apps/[a-z0-9-]+/installations/new'",
                     done.text)
    assert status == 200 and body["status"] == "ok"
    assert body["checks"]["github_auth"]["last_success"] == "app jwt"
    assert pinged.status_code == 200 and pinged.json()["ping"] is True
    assert code_at_exit == 0
    text = log.read_text()
    assert secret not in text and "PRIVATE KEY" not in text
    assert "Registered the GitHub App" in text
    assert config.github.api_url == simulator  # kept from the file


def test_registration_that_cannot_save_refuses_to_start(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        ) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    assert main(["serve", "--config", str(blocker / "config.yaml")]) == 2
    assert "does not exist and cannot be created" in capsys.readouterr().err


def test_a_role_without_the_web_page_cannot_register(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("triggers: {}\nbudget: {session_tokens: 88000, weekly_tokens: 1500000, "
                    "max_run_tokens: 30000}\n")
    assert main(["serve", "--config", str(path), "--role", "worker"]) == 2
    assert "serves no web page to register it from" in capsys.readouterr().err
    assert main(["serve", "--config", str(path), "--public-url", "reviews.example.com"]) == 2
    assert "--public-url must be an http(s) URL" in capsys.readouterr().err
