"""The chaos rig: the real ``serve`` process, the standalone simulator, the fake engine.

``ChaosRig(root, settings)`` lays out, under ``root``:

- one bare git repository per simulated repository (a base commit on ``main``, one branch
  per pull request the run will open, and the pull requests that exist from the start);
- the simulator's state file: one App, one organisation and installation per repository
  (the client paces writes per installation, so spreading repositories over
  installations is what lets several reviews publish at once), two MEMBER users;
- the engine plan for ``claude_chaos.py`` (durations, token counts, the usage log);
- ``config.yaml`` for ``serve`` (``config_for`` writes variants, e.g. another budget).

Then it starts the simulator with its activity routes and ``python -m service serve
--role all``, each a subprocess on loopback (``tests.kit.processes``), and lets a driver
act as GitHub's users (open pull requests, comment, deliver or withhold webhooks), kill
``serve`` with SIGKILL, restart it, and read back the store, the simulator's posts and
the engine's usage log.

Everything here is synchronous (``httpx.Client``): the driver is one loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psycopg
import yaml
from psycopg.rows import dict_row

from service.storage.postgres import translate_placeholders
from tests.fake_claude import engine_isolation
from tests.kit.ports import free_port
from tests.kit.processes import ServeProcess, SimulatorProcess, log_records
from tests.kit.waiting import wait_for
from tests.simulator import GitRepo
from tests.simulator.harness import app_key_pair
from tests.simulator.webhooks import HOOKSHOT_AGENT, encode_body, sign

ROOT = Path(__file__).resolve().parents[2]
APP_ID = 4242
SLUG = "pr-reviewer"
WEBHOOK_SECRET = "chaos-webhook-secret"
AUTHOR = "alice"
COMMENTER = "bob"
BASE_FILES = {"README.md": "# Chaos\n", "src/base.py": "BASE = 1\n"}
CLAUDE_CHAOS = Path(__file__).with_name("claude_chaos.py")
#: How long ``ChaosRig.until`` waits for what must happen.

T = TypeVar("T")


@dataclass(frozen=True)
class RigSettings:
    """What one rig is made of; every field has a small-run default."""

    repos: int = 8
    #: Pull requests that exist before ``serve`` first starts (mentions go on these).
    existing_pulls: int = 4
    #: Branches prepared for pull requests opened during the run, per repository.
    new_pulls: int = 5
    engine_seconds: tuple[float, float] = (0.2, 1.5)
    engine_tokens: tuple[int, int] = (4_000, 16_000)
    #: Triggers (``owner/name#N``) whose engine run hangs far past the wall clock.
    hang: tuple[str, ...] = ()
    workers: int = 4
    lease_seconds: int = 10
    wall_clock_seconds: int = 8
    poll_interval: int = 1
    session_tokens: int = 5_000_000
    weekly_tokens: int = 50_000_000
    max_run_tokens: int = 30_000
    #: ``serve --role all`` processes sharing the store, each its own "host" (config, port).
    hosts: int = 1
    #: The store: None for the SQLite file ``state.db``, else a PostgreSQL URL (more than
    #: one host needs one).
    store_url: str | None = None
    store_password: str | None = None
    #: Lines of the one file each pull request adds (all equal: the pre-flight estimate
    #: then keeps its defaults, so a random fit cannot refuse a run).
    lines_per_pull: int = 6
    #: Each installation's hourly rate limit: GitHub Enterprise Cloud's 15,000, so that
    #: the poller's sweep of a one-repository installation (``POLL_SHARE`` of it) comes
    #: round every 7 s rather than the 22 s of 5,000 — what these tests wait for when no
    #: webhook is sent (docs/POLLER.md#the-schedule).
    rate_limit: int = 15_000



def repo_name(index: int) -> str:
    return f"org{index}/repo{index}"


def tag(repo: str, number: int) -> str:
    """What the engine finds in the prompt to know whose run it is."""
    return f"[chaos:{repo}#{number}]"


@dataclass
class Branch:
    repo: str
    number: int
    head_sha: str
    base_sha: str
    head_ref: str


@dataclass
class Serve:
    """One incarnation of ``serve`` on one host."""

    index: int
    proc: ServeProcess
    started: float
    ready: float | None = None
    host: int = 0

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.proc.process

    @property
    def log(self) -> Path:
        return self.proc.log


@dataclass
class ChaosRig:
    root: Path
    settings: RigSettings = field(default_factory=RigSettings)
    sim_url: str = ""
    port: int = 0
    sim: SimulatorProcess | None = None
    #: Each host's latest incarnation of ``serve`` (by host index).
    serves: dict[int, Serve] = field(default_factory=dict)
    ports: list[int] = field(default_factory=list)
    incarnations: list[Serve] = field(default_factory=list)
    #: Processes started with ``start_role`` (the topology of separate roles).
    roles: list[Serve] = field(default_factory=list)
    existing: dict[str, list[Branch]] = field(default_factory=dict)
    unopened: dict[str, list[Branch]] = field(default_factory=dict)
    installations: dict[str, int] = field(default_factory=dict)
    user_ids: dict[str, int] = field(default_factory=dict)
    #: Where ``serve`` runs from (its working directory, so its ``service`` package):
    #: another checkout to measure an older version side by side.
    service_root: Path = ROOT

    # -- layout -------------------------------------------------------------------------

    @property
    def repos(self) -> list[str]:
        return [repo_name(i) for i in range(1, self.settings.repos + 1)]

    @property
    def store_path(self) -> Path:
        return self.root / "state.db"

    @property
    def serve(self) -> Serve | None:
        """Host 0's latest incarnation."""
        return self.serves.get(0)

    @property
    def usage_log(self) -> Path:
        return self.engine_dir / "usage.jsonl"

    @property
    def engine_dir(self) -> Path:
        """The engine's plan, usage log and scratch: the one tree it may write, apart
        from the store and the keys beside it (the sandbox proves it at startup)."""
        return self.root / "engine"

    @property
    def webhook_url(self) -> str:
        return self.webhook_url_of(0)

    @property
    def serve_url(self) -> str:
        return self.serve_url_of(0)

    def webhook_url_of(self, host: int) -> str:
        return f"{self.serve_url_of(host)}/webhook"

    def serve_url_of(self, host: int) -> str:
        return f"http://127.0.0.1:{self.ports[host]}"

    @staticmethod
    def host_config(config: Path, host: int) -> Path:
        """Host ``host``'s variant of a config ``config_for`` wrote (its own port)."""
        return config if host == 0 else config.with_name(
            f"{config.stem}.host{host}{config.suffix}")

    def lay_out(self) -> None:
        """Keys, git repositories, the simulator's state, the engine plan, the config."""
        s = self.settings
        self.root.mkdir(parents=True, exist_ok=True)
        private_pem, public_pem = app_key_pair()
        (self.root / "app.pem").write_text(private_pem)
        (self.root / "app.pub.pem").write_bytes(public_pem)
        (self.root / "webhook").write_text(WEBHOOK_SECRET)
        (self.engine_dir / "scratch").mkdir(parents=True, exist_ok=True)
        self.usage_log.touch()
        pulls: list[dict[str, Any]] = []
        for index, repo in enumerate(self.repos, start=1):
            git = GitRepo.create(self.root / "git" / f"repo{index}.git")
            base = git.commit(BASE_FILES, branch="main", message="base")
            branches = []
            for number in range(1, s.existing_pulls + s.new_pulls + 1):
                body = "".join(f"VALUE_{number}_{i} = {i}\n" for i in range(s.lines_per_pull))
                head = git.commit({f"src/mod_{number}.py": body}, parent=base,
                                  branch=f"feature-{number}", message=f"change {number}")
                branches.append(Branch(repo, number, head, base, f"feature-{number}"))
            self.existing[repo] = branches[:s.existing_pulls]
            self.unopened[repo] = branches[s.existing_pulls:]
            self.installations[repo] = 100 + index
            pulls += [{"repo": repo, "number": b.number, "title": f"Change {tag(repo, b.number)}",
                       "user": AUTHOR, "head": {"sha": b.head_sha, "ref": b.head_ref},
                       "base": {"sha": b.base_sha, "ref": "main"}}
                      for b in self.existing[repo]]
        self.user_ids = {AUTHOR: 11, COMMENTER: 12}
        state = {
            "app": {"id": APP_ID, "slug": SLUG, "public_key_file": "app.pub.pem",
                    "webhook_secret": WEBHOOK_SECRET, "owner": "org1"},
            "users": [{"login": login, "id": uid, "association": "MEMBER"}
                      for login, uid in self.user_ids.items()],
            "repositories": [{"full_name": repo, "git_dir": f"git/repo{i}.git"}
                             for i, repo in enumerate(self.repos, start=1)],
            "installations": [{"id": self.installations[repo], "account": repo.split("/")[0],
                               "repositories": [repo]} for repo in self.repos],
            "pull_requests": pulls,
            "settings": {"rate_limit": s.rate_limit},
        }
        (self.root / "sim-state.json").write_text(json.dumps(state, indent=1))
        self.write_plan()
        self.ports = [free_port() for _ in range(s.hosts)]
        self.port = self.ports[0]
        self.config_for()

    def write_plan(self, **changes: Any) -> None:
        s = replace(self.settings, **changes) if changes else self.settings
        self.settings = s
        (self.engine_dir / "plan.json").write_text(json.dumps({
            "usage_log": str(self.usage_log), "scratch": str(self.engine_dir / "scratch"),
            "min_seconds": s.engine_seconds[0], "max_seconds": s.engine_seconds[1],
            "min_tokens": s.engine_tokens[0], "max_tokens": s.engine_tokens[1],
            "hang": list(s.hang)}))

    def config_for(self, name: str = "config.yaml", *,
                   triggers: dict[str, Any] | None = None, **budget: int) -> Path:
        """A ``serve`` config for every host (``host_config`` names the others');
        ``triggers`` and ``budget`` override those sections. Host 0's path."""
        s = self.settings
        document = {
            "github": {"app_id": APP_ID, "private_key_file": "app.pem",
                       "webhook_secret_file": "webhook", "api_url": self.sim_url or
                       "http://127.0.0.1:9"},
            "server": {"host": "127.0.0.1", "port": self.port},
            "store": self._store_section(),
            "poller": {"interval_seconds": s.poll_interval},
            "triggers": triggers or {},
            "workers": {"count": s.workers, "lease_seconds": s.lease_seconds},
            "engine": {"command": f"{sys.executable} {CLAUDE_CHAOS} --plan "
                                  f"{self.engine_dir / 'plan.json'}",
                       "wall_clock_seconds": s.wall_clock_seconds, "max_turns": 5,
                       "kill_grace_seconds": 1, "credential_env": [],
                       **engine_isolation(self.engine_dir)},
            "retention": {"purge_after_close": False},
            "budget": {"session_tokens": s.session_tokens, "weekly_tokens": s.weekly_tokens,
                       "max_run_tokens": s.max_run_tokens, "reviewer_share_pct": 100,
                       **budget},
        }
        path = self.root / name
        for host, port in enumerate(self.ports or [self.port]):
            document["server"] = {"host": "127.0.0.1", "port": port}
            self.host_config(path, host).write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    def _store_section(self) -> dict[str, str]:
        s = self.settings
        if s.store_url is None:
            return {"path": "state.db"}
        if s.store_password is None:
            return {"url": s.store_url}
        (self.root / "store.password").write_text(s.store_password)
        return {"url": s.store_url, "password_file": "store.password"}

    # -- processes -----------------------------------------------------------------------

    def start_simulator(self) -> None:
        """The simulator, seeded with the laid-out world, with its activity routes."""
        self.sim = SimulatorProcess(self.root, state=self.root / "sim-state.json",
                                    activity=True, name="sim")
        self.sim_url = self.sim.url
        self.config_for()  # now with the simulator's address

    def start_serve(self, config: Path | None = None, *, wait: bool = True,
                    host: int = 0) -> Serve:
        """Start ``serve --role all`` on ``host``; with ``wait``, return once ``/healthz``
        answers."""
        if self.alive(host):
            raise RuntimeError(f"serve is already running on host {host}")
        serve = self._spawn("all", self.host_config(config or self.root / "config.yaml",
                                                    host), "serve", host)
        self.serves[host] = serve
        if wait:
            self.wait_ready(serve)
        return serve

    def start_role(self, role: str, config: Path | None = None) -> Serve:
        """Start ``serve --role ROLE`` beside the others (the roles share the store): the
        topology of several processes, each of which can be killed on its own."""
        serve = self._spawn(role, config, role)
        self.roles.append(serve)
        return serve

    def _spawn(self, role: str, config: Path | None, name: str, host: int = 0) -> Serve:
        index = len(self.incarnations) + 1
        proc = ServeProcess(config or self.root / "config.yaml",
                            self.root / f"{name}-{index}.log", url=self.serve_url_of(host),
                            role=role, cwd=self.service_root)
        serve = Serve(index=index, proc=proc, started=time.monotonic(), host=host)
        self.incarnations.append(serve)
        return serve

    @staticmethod
    def stop(serve: Serve, sig: int = signal.SIGKILL) -> int | None:
        """Signal one process of the topology and wait for it; its exit code."""
        return serve.proc.stop(sig)

    def wait_ready(self, serve: Serve) -> None:
        """Until ``serve`` answers /healthz; fails at once if it exits."""
        wait_for(f"serve on host {serve.host} to answer /healthz",
                 lambda: serve.proc.answers() is not None, alive=serve.proc.alive,
                 on_timeout=lambda: serve.proc.text()[-4000:])
        serve.ready = time.monotonic()

    def seeded(self) -> bool:
        """True once the poller has put both marks of every repository (the seed rows
        beside them, ``seed_*``, and the installation's search, ``search:*``, do not
        count)."""
        if not self._migrated():
            return False
        return len(self.rows("SELECT name FROM watermarks WHERE name LIKE 'comments:%'"
                             " OR name LIKE 'pull_requests:%'")) >= 2 * len(self.repos)

    def until(self, what: str, probe: Callable[[], T | None]) -> T:
        """``probe()`` once it is truthy (``tests.kit.waiting``: a loaded machine takes its
        time; only a hang fails), with the tail of every process's log if it never is."""
        return wait_for(what, probe, interval=0.1, on_timeout=lambda: "\n".join(
            s.log.read_text(errors="replace")[-3000:] for s in self.incarnations))

    def wait_seeded(self) -> None:
        """Until the poller has seeded every repository; fails at once if every serve
        process has exited."""
        def running() -> str | None:
            live = [s for s in self.serves.values() if s.process.poll() is None]
            return None if live else "every serve process has exited"
        self.until_alive("the poller to seed every repository", self.seeded, running)

    def until_alive(self, what: str, probe: Callable[[], T | None],
                    running: Callable[[], str | None]) -> T:
        return wait_for(what, probe, alive=running, interval=0.05, on_timeout=lambda: "\n".join(
            s.log.read_text(errors="replace")[-3000:] for s in self.incarnations))

    def _migrated(self) -> bool:
        """The store exists with its tables (the first process may still be making it)."""
        if self.settings.store_url is None:
            return self.store_path.exists() and bool(self.rows(
                "SELECT name FROM sqlite_master WHERE name = 'watermarks'"))
        return bool(self.rows("SELECT 1 FROM information_schema.tables"
                              " WHERE table_name = 'watermarks'"))

    def kill_serve(self, sig: int = signal.SIGKILL, host: int = 0) -> int | None:
        """Signal ``host``'s running ``serve`` and wait for it; its exit code."""
        serve = self.serves.get(host)
        return None if serve is None else self.stop(serve, sig)

    def alive(self, host: int = 0) -> bool:
        serve = self.serves.get(host)
        return serve is not None and serve.process.poll() is None

    def close(self) -> None:
        """Stop everything this rig started, including engine runs orphaned by a kill."""
        for host in list(self.serves):
            self.kill_serve(host=host)
        for role in self.roles:
            self.stop(role)
        for serve in self.incarnations:
            serve.proc.close()
        if self.sim is not None:
            self.sim.close()
        for pid in self.engine_pids():
            # Each engine run leads its own process group (the engine starts it in a new
            # session); a run whose serve was killed may still be sleeping.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if _is_ours(pid, self.root):
                    os.killpg(pid, signal.SIGKILL)

    # -- GitHub's users --------------------------------------------------------------------

    def chaos(self, method: str, route: str, body: dict[str, Any] | None = None) -> Any:
        response = httpx.request(method, f"{self.sim_url}/_simulator/activity/{route}",
                                 json=body, timeout=30)
        if response.status_code != 200:
            raise RuntimeError(f"{method} /_simulator/activity/{route}: {response.status_code} "
                               f"{response.text}")
        return response.json()

    def open_pull(self, repo: str, *, emit: bool) -> Branch:
        branch = self.unopened[repo].pop(0)
        self.chaos("POST", "pulls", {
            "repo": repo, "number": branch.number, "title": f"Change {tag(repo, branch.number)}",
            "user": AUTHOR, "head_sha": branch.head_sha, "base_sha": branch.base_sha,
            "head_ref": branch.head_ref, "emit": emit})
        return branch

    def comment(self, repo: str, number: int, body: str, *, emit: bool,
                user: str = COMMENTER) -> int:
        comment_id: int = self.chaos("POST", "comments", {
            "repo": repo, "number": number, "user": user, "body": body,
            "emit": emit})["id"]
        return comment_id

    def take_events(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.chaos("POST", "events/take")
        return events

    def deliver(self, events: list[dict[str, Any]], hosts: list[int] | None = None
                ) -> list[int | None]:
        """POST each event to ``serve`` as GitHub would (the i-th to ``hosts[i]``, default
        host 0); None where it could not connect (GitHub does not retry a failed delivery
        by itself: the poller must find it)."""
        statuses: list[int | None] = []
        with httpx.Client(timeout=10) as client:
            for i, event in enumerate(events):
                body, headers = signed_delivery(event["event"], event["payload"],
                                                event["delivery_id"])
                url = self.webhook_url_of(hosts[i] if hosts else 0)
                try:
                    statuses.append(client.post(url, content=body,
                                                headers=headers).status_code)
                except httpx.TransportError:
                    statuses.append(None)
        return statuses

    def posts(self) -> dict[str, Any]:
        posts: dict[str, Any] = self.chaos("GET", "posts")
        return posts

    def requests(self) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.sim_url}/_simulator/requests", timeout=30)
        records: list[dict[str, Any]] = response.json()
        return records

    def fault(self, **fault: Any) -> None:
        httpx.post(f"{self.sim_url}/_simulator/faults", json=fault, timeout=10
                   ).raise_for_status()

    # -- reading back -----------------------------------------------------------------------

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows of a query on the store, read-only (safe while ``serve`` runs)."""
        if self.settings.store_url is not None:
            with psycopg.connect(self.settings.store_url, autocommit=True,
                                 password=self.settings.store_password,
                                 row_factory=dict_row) as pg:
                return pg.execute(translate_placeholders(sql), params).fetchall()
        with contextlib.closing(sqlite3.connect(
                f"file:{self.store_path}?mode=ro", uri=True, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(sql, params)]

    def engine_runs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.usage_log.read_text().splitlines()
                if line.strip()]

    def engine_pids(self) -> list[int]:
        return [int(run["pid"]) for run in self.engine_runs()]

    def serve_log_lines(self) -> Iterator[dict[str, Any]]:
        """Every JSON log line of every incarnation (a torn last line after a kill is
        skipped)."""
        for serve in self.incarnations:
            for record in log_records(serve.proc.text()):
                record["_incarnation"] = serve.index
                record["_host"] = serve.host
                yield record


def signed_delivery(event: str, payload: dict[str, Any], delivery_id: str, *,
                    secret: str = WEBHOOK_SECRET) -> tuple[bytes, dict[str, str]]:
    """The body and headers GitHub sends for one delivery, signed with ``secret``."""
    body, mime = encode_body(payload, "json")
    sha256, sha1 = sign(secret, body)
    return body, {
        "Content-Type": mime, "User-Agent": HOOKSHOT_AGENT, "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id, "X-GitHub-Hook-ID": "479163224",
        "X-GitHub-Hook-Installation-Target-ID": str(APP_ID),
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-Hub-Signature-256": sha256, "X-Hub-Signature": sha1}


def _is_ours(pid: int, root: Path) -> bool:
    """True when ``pid`` is still a fake engine run of this rig (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return "fake_claude" in cmdline and str(root) in cmdline
