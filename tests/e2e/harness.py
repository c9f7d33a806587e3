"""The pieces of an end-to-end run: a seeded standalone simulator, a config, a ``serve``.

Everything runs as real processes on loopback:

- ``SeededSimulator``: the standalone simulator (``tests.kit.processes``) seeded by
  ``write_seed`` with an App (its RSA key generated at run time), an installation, users
  and a repository backed by a real bare git repository; read through its control API
  (``/_simulator/requests``) and its REST API (as the App, with a token of the test's own).
- ``write_config``: the service's ``config.yaml`` pointing at the simulator, with the
  store in the test's directory and the fake ``claude`` playing a scenario.
- ``HarnessServe``: ``serve`` (``tests.kit.processes``) on that config, its stderr captured
  to a file (the JSON log lines the tests read).

Each wait polls with a deadline; nothing sleeps for a fixed long time.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
import yaml

from service.github.webhooks import sign
from tests.fake_claude import Scenario
from tests.kit.processes import ServeProcess, SimulatorProcess
from tests.simulator import GitRepo
from tests.simulator.auth import generate_app_key
from tests.simulator.seed import load_world

APP_ID = 4242
APP_SLUG = "pr-reviewer"
INSTALLATION_ID = 31
REPO = "acme/widgets"
PR = 1
WEBHOOK_SECRET = "e2e-webhook-secret-5f0c9d"  # a test value, grepped for in the logs
BASE_FILES = {
    "README.md": "# Widgets\n",
    "src/app.py": "".join(f"line {i}\n" for i in range(1, 21)),
}
HEAD_FILES = {"src/new.py": "import os\n\nx = os.environ.get('X')\nprint(x)\n"}
#: What the fake ``claude`` answers: one finding on a line the diff adds.
ANSWER = {"summary": "Adds a module that reads X.", "risk": "low", "findings": [
    {"path": "src/new.py", "line": 3, "side": "RIGHT", "start_line": None,
     "severity": "minor", "category": "correctness", "title": "X may be unset",
     "body": "`os.environ.get` returns None when X is unset."}]}
#: Tokens a completed fake run reports (``modelUsage``), as the ledger should record them.
RUN_TOKENS = 15 + 220 + 3000 + 265
#: Shapes of credentials that must never reach a log line: installation tokens
#: (``ghs_…``), JWTs (a base64url JSON header), git's Basic header for a token.
CREDENTIAL_SHAPES = (re.compile(r"ghs_[A-Za-z0-9_.-]{8,}"), re.compile(r"eyJ[A-Za-z0-9_-]{8,}"),
                     re.compile(r"eC1hY2Nlc3MtdG9rZW46"))




# --- the fake claude -----------------------------------------------------------------


def review_steps(*, sleep: float = 0.0, answer: dict[str, Any] | None = None
                 ) -> list[dict[str, Any]]:
    """One fake ``claude`` invocation that answers ``answer`` (after ``sleep`` seconds)."""
    text = "```json\n" + json.dumps(answer or ANSWER) + "\n```"
    steps: list[dict[str, Any]] = [{"init": {}}]
    if sleep:
        steps.append({"sleep": sleep})
    steps += [
        {"assistant": {"text": text, "usage": {"input_tokens": 10, "output_tokens": 200}}},
        {"result": {"result": text, "total_cost_usd": 0.01, "modelUsage": {
            "claude-sonnet-4-5": {"inputTokens": 15, "outputTokens": 220,
                                  "cacheReadInputTokens": 3000,
                                  "cacheCreationInputTokens": 265, "costUSD": 0.01}}}},
    ]
    return steps


def started_calls(scenario: Scenario) -> list[dict[str, Any]]:
    """What each fake ``claude`` invocation recorded so far (argv, env, pid, ...)."""
    calls = []
    for n in range(1, scenario.calls + 1):
        try:
            calls.append(scenario.call(n))
        except (FileNotFoundError, json.JSONDecodeError):
            break  # written a moment after the counter
    return calls


def kill_leftover_engines(scenario: Scenario) -> None:
    """SIGKILL the process group of every fake ``claude`` still running (a ``serve`` that
    was SIGKILLed leaves its engine behind: it runs in a process group of its own)."""
    for call in started_calls(scenario):
        try:
            os.killpg(int(call["pgid"]), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# --- the simulator ---------------------------------------------------------------------


@dataclass
class Seeded:
    """What ``write_seed`` made: the state file, the App's key, the git repository."""

    state: Path
    private_key_pem: str = field(repr=False)
    git: GitRepo
    base_sha: str
    head_sha: str


def write_seed(directory: Path, *, pr_state: str = "open", app: bool = True) -> Seeded:
    """A state file: the App (key generated now), ``alice``, ``acme/widgets`` on a real
    git repository with ``main`` and ``feature``, its installation, and pull request #1
    from ``feature`` (``pr_state`` "closed" seeds it closed, last touched an hour ago)."""
    directory.mkdir(parents=True, exist_ok=True)
    private_pem, public_pem = generate_app_key()
    (directory / "app.pub.pem").write_bytes(public_pem)
    git = GitRepo.create(directory / "widgets.git")
    base = git.commit(BASE_FILES, branch="main", message="base")
    head = git.commit(HEAD_FILES, parent=base, branch="feature", message="Add new.py")
    pull: dict[str, Any] = {
        "repo": REPO, "number": PR, "title": "Add new.py", "body": "Reads X.",
        "user": "alice", "state": pr_state,
        "head": {"sha": head, "ref": "feature"}, "base": {"sha": base, "ref": "main"}}
    if pr_state == "closed":
        pull["created_at"] = pull["updated_at"] = "2020-01-01T00:00:00Z"
    state = {
        "app": {"id": APP_ID, "slug": APP_SLUG, "public_key_file": "app.pub.pem",
                "webhook_secret": WEBHOOK_SECRET, "owner": "acme",
                "permissions": {"pull_requests": "write", "issues": "write",
                                "contents": "read", "metadata": "read"}},
        "users": [{"login": "alice", "id": 11, "type": "User", "association": "MEMBER"}],
        "repositories": [{"full_name": REPO, "private": True, "default_branch": "main",
                          "git_dir": "widgets.git"}],
        "installations": [{"id": INSTALLATION_ID, "account": "acme", "repositories": [REPO]}],
        "pull_requests": [pull],
        # GitHub Enterprise Cloud's hourly limit: the poller's sweep of this one-repository
        # installation then comes round every 7 s instead of 22 s (docs/POLLER.md), which
        # is what a test without webhooks waits for.
        "settings": {"rate_limit": 15_000},
    }
    if not app:  # a GitHub where the App is still to be registered and installed
        del state["app"], state["installations"]
    path = directory / "seed.json"
    path.write_text(json.dumps(state, indent=1))
    return Seeded(state=path, private_key_pem=private_pem, git=git, base_sha=base,
                  head_sha=head)


class SeededSimulator(SimulatorProcess):
    """The standalone simulator (``tests.kit.processes``), seeded from ``seeded``, with
    what the end-to-end tests read from it."""

    def __init__(self, seeded: Seeded, directory: Path) -> None:
        super().__init__(directory, state=seeded.state)
        self.seeded = seeded
        self._token: str | None = None

    # -- the control API ------------------------------------------------------------------

    def requests(self, method: str | None = None, path_glob: str = "*"
                 ) -> list[dict[str, Any]]:
        """The API requests the simulator received (credentials redacted), oldest first."""
        records: list[dict[str, Any]] = self.client.get("/_simulator/requests").json()
        return [r for r in records if (method is None or r["method"] == method)
                and fnmatch.fnmatchcase(r["path"], path_glob)]

    def reactions(self) -> list[dict[str, Any]]:
        """Accepted ``POST …/issues/{PR}/reactions`` requests."""
        return [r for r in self.requests("POST", f"/repos/{REPO}/issues/{PR}/reactions")
                if r["status"] in (200, 201)]

    # -- REST, as the App (a token of the test's own, not the service's) --------------------

    def _app_jwt(self) -> str:
        now = int(time.time())
        return jwt.encode({"iat": now - 60, "exp": now + 540, "iss": str(APP_ID)},
                          self.seeded.private_key_pem, algorithm="RS256")

    def token(self) -> str:
        if self._token is None:
            response = self.client.post(
                f"/app/installations/{INSTALLATION_ID}/access_tokens",
                headers={"Authorization": f"Bearer {self._app_jwt()}"})
            assert response.status_code == 201, response.text
            self._token = str(response.json()["token"])
        return self._token

    def api(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"token {self.token()}",
                   "Accept": "application/vnd.github+json"}
        return self.client.request(method, path, headers=headers, **kwargs)

    def reviews(self) -> list[dict[str, Any]]:
        """The reviews on pull request #1, as GitHub would list them."""
        response = self.api("GET", f"/repos/{REPO}/pulls/{PR}/reviews")
        assert response.status_code == 200, response.text
        reviews: list[dict[str, Any]] = response.json()
        return reviews

    def reopen(self) -> None:
        """Reopen the seeded, closed pull request #1 (``PATCH state=open``)."""
        response = self.api("PATCH", f"/repos/{REPO}/pulls/{PR}", json={"state": "open"})
        assert response.status_code == 200, response.text

    def pull_request_payload(self, action: str = "opened") -> dict[str, Any]:
        """The ``pull_request`` webhook payload GitHub would send for #1, built by a copy
        of the same seeded world (ids and shas come out the same) under this URL."""
        world = load_world(self.seeded.state)
        world.api_url = self.url
        payload: dict[str, Any] = world.payloads.pull_request(action, world.pull(REPO, PR))
        return payload


# --- the service's config and process ------------------------------------------------

#: The admin token every harness config names (a test value).
ADMIN_TOKEN = "harness-admin-token-3f09"


def write_config(directory: Path, *, api_url: str, port: int, scenario: Scenario,
                 private_key_pem: str, **sections: dict[str, Any]) -> Path:
    """``config.yaml`` for ``serve``: the simulator as GitHub, a 1 s poller, two workers,
    the fake ``claude``; ``sections`` are merged over the defaults, key by key."""
    (directory / "app.pem").write_text(private_key_pem)
    (directory / "webhook").write_text(WEBHOOK_SECRET + "\n")
    (directory / "harness-admin-token").write_text(ADMIN_TOKEN + "\n")
    document: dict[str, dict[str, Any]] = {
        "github": {"app_id": APP_ID, "private_key_file": "app.pem",
                   "webhook_secret_file": "webhook", "api_url": api_url},
        "server": {"host": "127.0.0.1", "port": port,
                   "admin_token_file": "harness-admin-token"},
        "store": {"path": "state.db"},
        "poller": {"interval_seconds": 1},
        "triggers": {},
        "workers": {"count": 2, "lease_seconds": 600},
        "engine": {"command": scenario.command, "wall_clock_seconds": 60,
                   "kill_grace_seconds": 1, **scenario.isolation_config},
        "budget": {"session_tokens": 1_000_000, "weekly_tokens": 10_000_000,
                   "max_run_tokens": 50_000},
    }
    for name, values in sections.items():
        document[name] = {**document.get(name, {}), **values}
    path = directory / "config.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


class HarnessServe(ServeProcess):
    """``serve`` on a harness config (``tests.kit.processes``): its client carries the
    admin token the config names (a test that sets another passes its own)."""

    def __init__(self, config: Path, port: int, log: Path, *, role: str = "all",
                 log_format: str | None = None, args: tuple[str, ...] = ()) -> None:
        super().__init__(config, log, url=f"http://127.0.0.1:{port}", role=role,
                         log_format=log_format, args=args,
                         headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})

    def budget(self, token: str | None = None) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        response = self.client.get("/budget", headers=headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    def post_webhook(self, event: str, payload: dict[str, Any], *,
                     delivery_id: str) -> httpx.Response:
        """POST ``payload`` as GitHub does, signed with the webhook secret."""
        body = json.dumps(payload).encode()
        return self.client.post("/webhook", content=body, headers={
            "Content-Type": "application/json", "X-GitHub-Event": event,
            "X-GitHub-Delivery": delivery_id, "X-Hub-Signature-256": sign(body, WEBHOOK_SECRET),
            "User-Agent": "GitHub-Hookshot/e2e"})
