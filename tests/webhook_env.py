"""A webhook receiver over a real store and the simulator's payloads, for the tests of
the webhook route (``service.intake.webhook``) and of the web app around it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml
from fastapi import FastAPI

from service.app.serving import web_server
from service.app.web import InstallationChange, create_app
from service.budget.governor import Governor
from service.config.connections import ServerConfig
from service.config.schema import Config
from service.config.strict_yaml import load_config
from service.github.webhooks import sign
from service.intake.rules.decisions import TriggerContext
from service.observe.health import Health
from service.storage.agent_comments import AgentComments
from service.storage.database import Database
from service.storage.postgres import PostgresStore
from tests.databases import migrated_database
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.kit.waiting import wait_for_async
from tests.simulator import WebhookSender, World
from tests.simulator.harness import REPO, Harness, app_key_pair

SECRET = "It's a Secret to Everybody"
PREVIOUS_SECRET = "the-secret-before-rotation"
NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)
LIMIT = 64 * 1024
#: How a test's requests reach the app (``open_env``'s ``entry``).
ENTRIES = ("asgi", "socket")


class Clock:
    """A settable clock for ``create_app``."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def write_config(tmp_path: Path, *, server: dict[str, Any] | None = None,
                 github: dict[str, Any] | None = None, port: int = 8080,
                 store: dict[str, Any] | None = None, name: str = "config.yaml") -> Path:
    (tmp_path / "app.pem").write_text(app_key_pair()[0])
    (tmp_path / "webhook").write_text(SECRET + "\n")
    (tmp_path / "webhook.previous").write_text(PREVIOUS_SECRET)
    document = {
        "github": {"app_id": 4242, "private_key_file": "app.pem",
                   "webhook_secret_file": "webhook",
                   "previous_webhook_secret_file": "webhook.previous", **(github or {})},
        "server": {"host": "127.0.0.1", "port": port, "max_body_bytes": LIMIT,
                   **(server or {})},
        "store": store or {"path": "state.db"},
        "triggers": {},
        "budget": {"session_tokens": 1_000_000, "weekly_tokens": 10_000_000,
                   "max_run_tokens": 50_000},
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document))
    return path


@dataclass
class Env:
    config: Config
    store: Database
    queue: QueueDriver
    health: Health
    clock: Clock
    client: httpx.AsyncClient
    sender: WebhookSender
    world: World
    harness: Harness
    app: FastAPI
    changes: list[InstallationChange] = field(default_factory=list)

    def rows(self, table: str) -> list[tuple[Any, ...]]:
        with self.store.read() as tx:
            return [tuple(row) for row in tx.execute(f"SELECT * FROM {table} ORDER BY 1")]

    def delivery(self, delivery_id: str) -> dict[str, Any] | None:
        with self.store.read() as tx:
            cursor = tx.execute("SELECT * FROM deliveries WHERE delivery_id = ?",
                                (delivery_id,))
            row = cursor.fetchone()
            names = [column[0] for column in cursor.description]
        return None if row is None else dict(zip(names, row, strict=True))

    async def post(self, event: str, body: bytes, headers: dict[str, str] | None = None,
                   *, delivery_id: str = "d-1", secret: str | None = SECRET,
                   content_type: str = "application/json") -> httpx.Response:
        """A hand-built delivery, for the cases the sender would not produce."""
        sent = {"Content-Type": content_type, "X-GitHub-Event": event,
                "X-GitHub-Delivery": delivery_id}
        if secret is not None:
            sent["X-Hub-Signature-256"] = sign(body, secret)
        sent.update(headers or {})
        return await self.client.post(self.config.server.webhook_path, content=body,
                                      headers={k: v for k, v in sent.items() if v})


@asynccontextmanager
async def open_env(tmp_path: Path, *, busy_timeout: float = 5.0,
                   server: dict[str, Any] | None = None,
                   callback: Callable[[InstallationChange], None] | None = None,
                   backend: str = "sqlite", entry: str = "asgi") -> AsyncIterator[Env]:
    """The app over a fresh store on ``backend`` (``tests.databases.BACKENDS``);
    installation changes are collected in ``Env.changes`` unless ``callback`` is given.

    ``entry`` is how requests reach it (``ENTRIES``): ``asgi``, httpx's ASGI transport;
    ``socket``, a real socket to uvicorn configured as ``serve`` configures it."""
    async with AsyncExitStack() as stack:
        config = load_config(write_config(tmp_path, server=server), {})
        store: Database
        if backend == "sqlite":
            store = new_sqlite_store(config.store.path, busy_timeout=busy_timeout)
        else:
            conninfo = stack.enter_context(migrated_database())
            store = PostgresStore(conninfo, lock_timeout=busy_timeout)
        yield await stack.enter_async_context(_env(config, store, callback, entry))


@dataclass
class Served:
    port: int
    server: uvicorn.Server
    task: asyncio.Task[None]


@asynccontextmanager
async def serving(app: FastAPI, limits: ServerConfig | None = None
                  ) -> AsyncIterator[Served]:
    """``app`` served by uvicorn as ``serve`` serves it (with ``limits``' bounds on
    unauthenticated traffic, the defaults when None), on a loopback port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = web_server(app, limits)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_for_async("uvicorn to start", lambda: server.started or (
            task.done() and task.result()), interval=0.01)
        yield Served(sock.getsockname()[1], server, task)
    finally:
        server.should_exit = True
        await task
        sock.close()


@asynccontextmanager
async def _client(app: FastAPI, entry: str
                  ) -> AsyncIterator[httpx.AsyncClient]:
    if entry == "asgi":
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://service") as client:
            yield client
    elif entry == "socket":
        async with serving(app) as served, httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{served.port}") as client:
            yield client
    else:
        raise ValueError(f"unknown entry {entry!r}")


@asynccontextmanager
async def _env(config: Config, store: Database,
               callback: Callable[[InstallationChange], None] | None,
               entry: str = "asgi") -> AsyncIterator[Env]:
    harness = Harness.create()
    clock = Clock()
    queue = QueueDriver(store)
    health = Health(store)
    context = TriggerContext(config.triggers, harness.app.id, harness.app.slug,
                             AgentComments(store),
                             decline_phrases=config.review.decline_phrases)
    changes: list[InstallationChange] = []
    app = create_app(
        config=config, store=store,
        governor=Governor(store, config.budget, clock=clock, publish=False),
        triggers=lambda: context, health=health, clock=clock,
        on_installation_change=callback or changes.append,
    )
    try:
        async with harness.client, _client(app, entry) as client:
            sender = WebhookSender(client, url=config.server.webhook_path, secret=SECRET,
                                   app_id=harness.app.id)
            yield Env(config=config, store=store, queue=queue, health=health, clock=clock,
                      client=client, sender=sender, world=harness.world, harness=harness,
                      app=app, changes=changes)
    finally:
        store.close()


def opened(env: Env, number: int = 1) -> dict[str, Any]:
    return env.world.payloads.pull_request("opened", env.world.pull(REPO, number))


def pr_key(env: Env, number: int = 1) -> str:
    return f"pr_opened:{REPO}:{number}:{env.world.pull(REPO, number).head.head_sha}"
