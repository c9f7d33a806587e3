"""docs/DEVELOPMENT.md's walk-through, as a test: on a simulated GitHub with a repository and
a pull request but no App, ``serve`` on a config without one registers it through its page
(played by ``tests.simulator.browser``, as a person's browser would), the simulator's
control API installs the new App on the repository, and a mention gets the first review —
posted as the newly registered App."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml

from tests.e2e.conftest import E2E
from tests.e2e.harness import PR, REPO, review_steps
from tests.fake_claude import Scenario
from tests.kit.paths import CHECKOUT as ROOT
from tests.kit.waiting import wait_for


def test_registration_then_installation_then_the_first_review(make_e2e: Any) -> None:
    e2e: E2E = make_e2e(app=False)
    e2e.service_dir.mkdir()
    scenario = Scenario(e2e.tmp / "claude", review_steps())
    e2e.scenario = scenario
    e2e.config = e2e.service_dir / "config.yaml"
    e2e.config.write_text(yaml.safe_dump({  # what DEVELOPMENT.md's step writes
        "github": {"api_url": e2e.sim.url},
        "server": {"host": "127.0.0.1", "port": e2e.port},
        "poller": {"interval_seconds": 1},
        "triggers": {},
        "engine": {"command": scenario.command, **scenario.isolation_config},
        "budget": {"session_tokens": 1_000_000, "weekly_tokens": 10_000_000,
                   "max_run_tokens": 50_000}}))
    serve = e2e.serve(log_format="text")
    link = wait_for("the registration link", lambda: _link(serve.text()),
                    alive=serve.alive, on_timeout=serve.text)

    browsed = subprocess.run([sys.executable, "-m", "tests.simulator.browser", link,
                              "--org", "acme"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, check=False)
    assert browsed.returncode == 0, browsed.stdout + browsed.stderr
    install = re.search(r"install it at (\S+)", browsed.stdout)
    assert install and install[1].startswith(f"{e2e.sim.url}/apps/")
    slug = install[1].split("/apps/")[1].split("/")[0]
    registered = yaml.safe_load(e2e.config.read_text())["github"]
    assert registered["app_id"] and registered["api_url"] == e2e.sim.url
    # The same process goes on to serve the App once GitHub accepts its JWT.
    wait_for("the service to start", lambda: _authenticated(serve.healthz()),
             alive=serve.alive, on_timeout=serve.text)

    # The install page the link opens, then the install itself (what its button does).
    page = e2e.sim.client.get(f"/apps/{slug}/installations/new")
    assert page.status_code == 200 and REPO in page.text
    installed = e2e.sim.client.post("/_simulator/installations",
                                    json={"app_slug": slug, "repositories": [REPO]})
    assert installed.status_code == 201, installed.text
    assert installed.json()["app_id"] == registered["app_id"]
    deliver = {"url": f"{serve.url}/webhook"}
    sent = e2e.sim.client.post("/_simulator/webhooks/deliver", json=deliver)
    assert sent.status_code == 200, sent.text
    [event] = sent.json()["delivered"]
    assert (event["event"], event["action"], event["status"]) == ("installation", "created",
                                                                    202)

    asked = e2e.sim.client.post("/_simulator/issue-comments", json={
        "repo": REPO, "number": PR, "user": "alice", "body": "@claude review"})
    assert asked.status_code == 201
    [mention] = e2e.sim.client.post("/_simulator/webhooks/deliver", json=deliver).json()[
        "delivered"]
    assert (mention["event"], mention["status"]) == ("issue_comment", 202)

    def reviews() -> list[dict[str, Any]]:  # as GitHub tells the App about it
        return [e["payload"]["review"] for e in e2e.sim.client.get("/_simulator/events").json()
                if e["event"] == "pull_request_review"]

    [review] = wait_for("the first review", reviews, alive=serve.alive, on_timeout=serve.text)
    assert review["user"]["login"] == f"{slug}[bot]"
    assert f"mention:{REPO}:{PR}:{asked.json()['id']}" in review["body"]


def _authenticated(health: dict[str, Any] | None) -> bool:
    auth = (health or {}).get("checks", {}).get("github_auth", {})
    return bool(auth.get("last_success_at"))


def _link(text: str) -> str | None:
    found = re.search(r"(http://\S+/\?key=\S+)", text)
    return None if found is None else found[1]
