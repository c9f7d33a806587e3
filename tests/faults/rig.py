"""The fault-injection rig: the whole daemon in-process against the simulated GitHub.

``FaultRig.create(tmp)`` builds a ``World`` (one App; per repository its own organisation,
installation and bare git repository with pull requests ready to be mentioned), writes
``config.yaml`` (engine: ``tests/chaos/claude_chaos.py`` over the fake ``claude``; a
short queue lease and engine wall clock; the poller every second) and loads it.
``async with rig.running() as url:`` runs ``service.app.daemon.run(config, "all", …)`` with
the simulator's transport and a listening socket on 127.0.0.1, so webhooks are real HTTP
while every GitHub call goes into ``world``, where faults are scheduled.

Log records of the ``service`` loggers are kept in ``rig.records`` (``rig.logged(...)``
finds them), so a test can assert the line an operator would read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import sys
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from service.app import daemon, serving
from service.config.schema import Config
from service.config.strict_yaml import load_config
from tests.chaos.rig import CLAUDE_CHAOS, signed_delivery
from tests.fake_claude import engine_isolation
from tests.kit.waiting import wait_for_async
from tests.simulator import GitRepo, Settings, SimulatorTransport, World
from tests.simulator.harness import app_key_pair

APP_ID = 4242
SLUG = "pr-reviewer"
BOT = f"{SLUG}[bot]"


class Capture(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class FaultRig:
    tmp: Path
    world: World
    config: Config
    repos: list[str]
    installations: dict[str, int]
    capture: Capture = field(default_factory=Capture)
    url: str = ""
    _task: asyncio.Task[int] | None = None

    @classmethod
    def create(cls, tmp: Path, *, repos: int = 1, wall_clock_seconds: int = 10,
               hang: Iterable[str] = (), store_dir: Path | None = None,
               engine_seconds: tuple[float, float] = (0.1, 0.4), workers: int = 2
               ) -> FaultRig:
        tmp.mkdir(parents=True, exist_ok=True)
        private_pem, public_pem = app_key_pair()
        # GitHub Enterprise Cloud's hourly limit: the poller's sweep of a one-repository
        # installation comes round every 7 s, not 22 s (docs/POLLER.md#the-schedule).
        world = World(settings=Settings(rate_limit=15_000))
        world.add_app(id=APP_ID, slug=SLUG, public_key_pem=public_pem, owner="org1")
        world.add_user("alice", association="MEMBER")
        world.add_user("bob", association="MEMBER")
        names = [f"org{i}/repo{i}" for i in range(1, repos + 1)]
        installations = {}
        for index, repo in enumerate(names, start=1):
            git = GitRepo.create(tmp / "git" / f"repo{index}.git")
            world.add_repository(repo, git_dir=git.path)
            installations[repo] = world.add_installation(
                account=repo.split("/")[0], repositories=[repo], id=100 + index).id
            base = git.commit({"README.md": "# Faults\n"}, branch="main", message="base")
            for number in (1, 2):
                head = git.commit({f"src/mod_{number}.py": "".join(
                    f"VALUE_{i} = {i}\n" for i in range(6))}, parent=base,
                    branch=f"feature-{number}", message=f"change {number}")
                world.add_pull(repo, number=number, title=f"Change [chaos:{repo}#{number}]",
                               user="alice", head_sha=head, base_sha=base)
        (tmp / "app.pem").write_text(private_pem)
        (tmp / "webhook").write_text("fault-secret")
        engine_dir = tmp / "engine"  # all the engine may write: not the store, nor the key
        (engine_dir / "scratch").mkdir(parents=True, exist_ok=True)
        (engine_dir / "usage.jsonl").touch()
        (engine_dir / "plan.json").write_text(json.dumps({
            "usage_log": str(engine_dir / "usage.jsonl"), "scratch": str(engine_dir / "scratch"),
            "min_seconds": engine_seconds[0], "max_seconds": engine_seconds[1],
            "min_tokens": 1000, "max_tokens": 5000, "hang": list(hang)}))
        store = (store_dir or tmp) / "state.db"
        (tmp / "config.yaml").write_text(yaml.safe_dump({
            "github": {"app_id": APP_ID, "private_key_file": "app.pem",
                       "webhook_secret_file": "webhook", "api_url": "https://api.github.com"},
            "server": {"host": "127.0.0.1", "port": 8080},
            "store": {"path": str(store)},
            "poller": {"interval_seconds": 1},
            "triggers": {},
            "workers": {"count": workers, "lease_seconds": 30},
            "engine": {"command": f"{sys.executable} {CLAUDE_CHAOS} --plan "
                                  f"{engine_dir / 'plan.json'}",
                       "wall_clock_seconds": wall_clock_seconds, "max_turns": 5,
                       "kill_grace_seconds": 1, "credential_env": [],
                       **engine_isolation(engine_dir)},
            "retention": {"purge_after_close": False},
            "budget": {"session_tokens": 5_000_000, "weekly_tokens": 50_000_000,
                       "max_run_tokens": 30_000, "reviewer_share_pct": 100},
        }))
        world.app.webhook_secret = "fault-secret"
        config = load_config(str(tmp / "config.yaml"), {})
        return cls(tmp=tmp, world=world, config=config, repos=names,
                   installations=installations)

    # -- running the daemon ------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[asyncio.Task[int]]:
        """``daemon.run(config, "all")`` as a task until the block ends (then a clean stop);
        the task is yielded so a test can see it end by itself (a component failed)."""
        sock = serving.listen("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        stop = asyncio.Event()
        with self.capturing():
            task = asyncio.create_task(daemon.run(
                self.config, "all", stop, transport=SimulatorTransport(self.world),
                sockets=[sock]))
            try:
                self._task = task
                await self.wait_for(self._listening, "the web server to listen")
                yield task
            finally:
                stop.set()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 40)
                sock.close()

    @contextlib.contextmanager
    def capturing(self) -> Iterator[None]:
        """Keep every record of the ``service`` loggers in ``capture`` meanwhile."""
        logger = logging.getLogger("service")
        logger.addHandler(self.capture)
        previous = logger.level
        logger.setLevel(logging.DEBUG)
        try:
            yield
        finally:
            logger.removeHandler(self.capture)
            logger.setLevel(previous)

    async def _listening(self) -> bool:
        try:
            async with httpx.AsyncClient() as client:
                await client.get(f"{self.url}/healthz", timeout=1)
        except httpx.TransportError:
            return False
        return True

    async def wait_for(self, condition: Any, what: str) -> None:
        """Until ``condition()`` (a coroutine function too) is truthy: bounded by the
        daemon still running and ``tests.kit.waiting``'s ceiling, never a nominal time."""
        def running() -> str | None:
            task = self._task
            if task is not None and task.done():
                return f"the daemon ended: {task.exception() or task.result()!r}"
            return None
        await wait_for_async(what, condition, alive=running)

    # -- GitHub's users -------------------------------------------------------------------

    def mention(self, repo: str, number: int = 1, command: str = "review") -> str:
        """``@claude COMMAND`` on ``repo#number`` (its webhook is emitted); the dedupe key."""
        comment = self.world.add_issue_comment(repo, number, user="bob",
                                               body=f"@claude {command}", emit=True)
        return f"mention:{repo}:{number}:{comment.id}"

    async def deliver(self) -> list[int | None]:
        """Deliver every emitted webhook to the daemon; None where the connection failed."""
        statuses: list[int | None] = []
        async with httpx.AsyncClient(timeout=30) as client:
            while self.world.events:
                event = self.world.events.pop(0)
                body, headers = signed_delivery(event.event, event.payload, event.delivery_id,
                                                secret="fault-secret")
                try:
                    response = await client.post(f"{self.url}/webhook", content=body,
                                                 headers=headers)
                    statuses.append(response.status_code)
                except httpx.TransportError:
                    statuses.append(None)
        return statuses

    # -- reading back ------------------------------------------------------------------------

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        with contextlib.closing(sqlite3.connect(self.config.store.path, timeout=30)) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(sql, params)]

    def status(self, key: str) -> str | None:
        rows = self.rows("SELECT status FROM queue WHERE dedupe_key = ?", (key,))
        return str(rows[0]["status"]) if rows else None

    def published(self, key: str) -> bool:
        rows = self.rows("SELECT publish_outcome FROM runs WHERE dedupe_key = ?", (key,))
        return bool(rows) and rows[0]["publish_outcome"] is not None

    def posts_of(self, key: str) -> int:
        """How many of the App's reviews and comments carry ``key``'s run marker."""
        marker = f"<!-- pr-review-agent:{key} -->"
        bodies = [r.body for r in self.world.reviews.values() if r.user.login == BOT]
        bodies += [c.body for c in self.world.issue_comments.values() if c.user.login == BOT]
        return sum(1 for body in bodies if marker in (body or "").splitlines())

    def logged(self, message: str, **fields: Any) -> list[logging.LogRecord]:
        """Records whose message contains ``message`` and whose extra fields match."""
        return [r for r in self.capture.records if message in r.getMessage()
                and all(getattr(r, k, None) == v for k, v in fields.items())]

    def engine_runs(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in
                (self.tmp / "engine" / "usage.jsonl").read_text().splitlines() if line.strip()]
