"""The composition root: the one place that builds every component and wires them together.

``serve(config, role)`` is what ``pr-review-agent serve`` runs. A *role* names the
components this process runs; they share one store, one queue, one governor, one health
registry and one GitHub client:

========  ==========================
role      components
========  ==========================
web       the HTTP receiver (``service.app.web``)
poller    the ETag poller
worker    the review workers
all       all of the above
========  ==========================

A component is a coroutine ``runner(services, stop)`` that runs until ``stop`` is set and
then winds down; ``RUNNERS`` maps component names to runners, and a role is available when
every component it names has one. SIGTERM and SIGINT set ``stop`` (a second one sets ``force``:
the web server drops open connections and the workers cancel running jobs); a clean stop
exits 0.

The App's slug is fetched in the background as the components start (``GET /app`` with the
App JWT), so the trigger rules learn the App's ``{slug}[bot]`` login. Until then, and for as
long as GitHub cannot be reached (retried every 5 minutes, with a warning and a degraded
``github_auth`` health check), the rules recognise the App's own comments by
``performed_via_github_app.id`` and by the author being a Bot, which every App comment is.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Final

import anyio
import httpx

from service.app.identity import AppIdentity
from service.app.reload import reload_config
from service.app.runners import engine_isolation_problem, run_poller, run_workers
from service.app.services import Clock, Services, service_redactor, utc_now
from service.app.serving import (
    event_loop_factory,
    listen,
    raise_file_limit,
    settle_garbage_collector,
    web_server,
)
from service.app.shutdown import Shutdown
from service.app.web import create_app
from service.budget.governor import Governor
from service.config.schema import Config
from service.github.auth import AppJWT, InstallationToken, InstallationTokens
from service.github.client import GitHubClient
from service.github.installations import mint_installation_token
from service.model.etags import ETagStore
from service.observe.health import Health
from service.observe.metrics.instruments import Metrics
from service.review.repository_config import RepositoryConfigs
from service.storage.open import open_store, store_label
from service.storage.queue_lease import Leasing

__all__ = [
    "AVAILABLE_ROLES",
    "ROLES",
    "RoleUnavailableError",
    "check_role",
    "github_client",
    "run",
    "serve",
    "utc_now",
]

log = logging.getLogger(__name__)

#: Role -> the components it runs.
ROLES: Final[Mapping[str, tuple[str, ...]]] = {
    "web": ("web",),
    "poller": ("poller",),
    "worker": ("workers",),
    "all": ("web", "poller", "workers"),
}


class RoleUnavailableError(ValueError):
    """A role that does not exist, or whose components this build cannot run yet."""


Runner = Callable[[Services, asyncio.Event], Awaitable[None]]


async def _run_web(services: Services, stop: asyncio.Event) -> None:
    app = create_app(
        config=services.config, store=services.store,
        governor=services.governor, triggers=services.identity.context,
        health=services.health, clock=services.clock,
        on_installation_change=services.installation_changed,
        on_enqueued=services.queued.ring, metrics=services.metrics,
        environ=services.environ,
    )
    server = web_server(app, services.config.server)

    async def stopper() -> None:
        await stop.wait()
        server.should_exit = True
        await services.force.wait()
        server.force_exit = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(stopper)
        for sock in services.sockets:
            host, port = sock.getsockname()[:2]
            log.info("listening", extra={"host": host, "port": port,
                                         "webhook_path": services.config.server.webhook_path})
        if services.shutdown is not None:
            services.shutdown.web_serving()
        try:
            await server.serve(sockets=services.sockets)
        finally:
            if services.shutdown is not None:
                services.shutdown.web_stopped()
        tg.cancel_scope.cancel()
    if not stop.is_set():
        raise RuntimeError("the web server stopped by itself")


#: Component name -> runner.
RUNNERS: Final[dict[str, Runner]] = {
    "web": _run_web, "poller": run_poller, "workers": run_workers,
}
AVAILABLE_ROLES: Final = tuple(r for r, parts in ROLES.items() if all(p in RUNNERS for p in parts))


def check_role(role: str) -> tuple[str, ...]:
    """The components of ``role``, or ``RoleUnavailableError`` saying why not."""
    if role not in ROLES:
        raise RoleUnavailableError(f"unknown role {role!r}; roles are {', '.join(ROLES)}")
    parts = ROLES[role]
    missing = [p for p in parts if p not in RUNNERS]
    if missing:
        raise RoleUnavailableError(
            f"role {role!r} is not available in this build (it needs {', '.join(missing)}, "
            f"not built yet); available: {', '.join(AVAILABLE_ROLES)}")
    return parts


def github_client(config: Config, health: Health, clock: Clock,
                  transport: httpx.AsyncBaseTransport | None = None,
                  environ: Mapping[str, str] | None = None, *,
                  metrics: Metrics | None = None) -> GitHubClient:
    """The process's one GitHub client.

    Every installation token mint is reported to ``health`` (the ``github_auth`` check),
    so a key GitHub stops accepting shows on ``/healthz`` at the next mint, not only at
    start. The poller's conditional GETs need an ETag cache; in memory is enough: entries
    are keyed per installation token and a restarted process mints a new token, so a
    durable cache would only add a SQLite write on the event loop per listing.
    """
    client: GitHubClient

    async def mint(installation_id: int) -> InstallationToken:
        try:
            token = await mint_installation_token(client, installation_id)
        except Exception as exc:
            health.auth_failed(clock(), f"installation {installation_id} token mint failed: "
                                        f"{exc or type(exc).__name__}")
            raise
        health.auth_succeeded(clock(), f"installation {installation_id} token")
        return token

    client = GitHubClient(
        config.github.api_url,
        app_jwt=AppJWT(config.github.app_id, config.github.private_key, clock),
        clock=clock, tokens=InstallationTokens(mint, clock), etags=ETagStore(),
        transport=transport, redactor=service_redactor(config, environ or {}),
        on_rate_limit=None if metrics is None else (
            lambda actor, limit: metrics.rate_limit(0 if actor == "app" else actor,
                                                    limit.remaining)
            if limit.resource == "core" else None))
    return client


async def run(
    config: Config,
    role: str,
    stop: asyncio.Event,
    *,
    clock: Clock = utc_now,
    transport: httpx.AsyncBaseTransport | None = None,
    sockets: list[socket.socket] | None = None,
    force: asyncio.Event | None = None,
    environ: Mapping[str, str] | None = None,
    reload: asyncio.Event | None = None,
    config_path: str | None = None,
    shutdown: Shutdown | None = None,
) -> int:
    """Run ``role``'s components until ``stop`` is set; 0 after a clean stop, 1 on failure.

    ``transport`` reaches GitHub (tests pass the simulator's); ``sockets`` are listening
    sockets for the web server (default: bind ``server.host:server.port``); ``force``, once
    set after ``stop``, cuts the graceful wind-down short.
    """
    parts = check_role(role)
    if "web" in parts and config.server.admin == "open":
        log.warning("server.admin is open: /status, /budget and /metrics answer anyone who "
                    "can reach this server (set server.admin_token_file and remove "
                    "server.admin to close them)")
    if "workers" in parts:
        # Fail closed: an engine that could read this host's secrets never starts.
        problem = await anyio.to_thread.run_sync(
            engine_isolation_problem, config, config_path, dict(environ or {}))
        if problem is not None:
            log.error("cannot start the workers: %s", problem)
            return 1
    own_sockets = sockets is None
    try:
        listening = (sockets if sockets is not None else
                     [listen(config.server.host, config.server.port)] if "web" in parts else [])
    except OSError as exc:
        log.error("cannot listen", extra={"host": config.server.host,
                                          "port": config.server.port, "error": str(exc)})
        return 1
    try:
        store = open_store(config.store, role=role)
    except Exception as exc:
        log.error("cannot open the store", extra={"path": store_label(config.store),
                                                  "error": f"{type(exc).__name__}: {exc}"})
        for sock in listening if own_sockets else []:
            sock.close()
        return 1
    try:
        metrics = Metrics()
        try:
            governor = Governor(store, config.budget, clock=clock, metrics=metrics,
                                ask_run_tokens=config.ask.max_run_tokens)
            health = Health(store, breaker_probe=governor.breaker)
        except Exception:
            log.exception("cannot start: building the components failed")
            return 1
        async with github_client(config, health, clock, transport, environ,
                                 metrics=metrics) as github:
            try:
                # Read through the services at each use, so a SIGHUP's allow list applies.
                repo_configs = RepositoryConfigs(
                    store=store, github=github, clock=clock,
                    config=lambda: services.config.repository_config,
                    triggers=lambda: services.config.triggers)
                services = Services(
                    config=config, store=store,
                    leasing=Leasing(lease=timedelta(seconds=config.workers.lease_seconds)),
                    governor=governor, health=health,
                    identity=AppIdentity(config, store, repo_triggers=repo_configs.triggers),
                    github=github, clock=clock, sockets=listening,
                    force=force or asyncio.Event(), environ=dict(environ or {}),
                    shutdown=shutdown,
                    repo_configs=repo_configs, metrics=metrics,
                )
            except Exception:
                log.exception("cannot start: building the components failed")
                return 1
            return await _run_components(services, parts, stop, transport,
                                         reload=reload, config_path=config_path)
    finally:
        for sock in listening if own_sockets else []:
            sock.close()
        store.close()


def apply_reload(services: Services, config_path: str) -> None:
    """SIGHUP: re-read the file; ``budget`` and ``publish.dry_run`` take effect at once.

    Everything else that changed is logged as needing a restart and not applied; a file
    that does not load is logged at ERROR and the running config stays in force.
    """
    result = reload_config(config_path, services.environ, services.config)
    if result.error is not None:
        services.health.reload_refused(services.clock(), result.error)
        return
    services.health.reload_applied()
    services.config = result.config
    if "budget" in result.applied:
        services.governor.config = result.config.budget  # one assignment, frozen value


async def _watch_reloads(services: Services, reload: asyncio.Event, config_path: str) -> None:
    while True:
        await reload.wait()
        reload.clear()
        try:
            await anyio.to_thread.run_sync(apply_reload, services, config_path)
        except Exception:  # a reload must never take the service down
            log.exception("config reload failed; the previous config stays in force")


async def _run_components(services: Services, parts: tuple[str, ...], stop: asyncio.Event,
                          transport: httpx.AsyncBaseTransport | None, *,
                          reload: asyncio.Event | None = None,
                          config_path: str | None = None) -> int:
    failed: list[str] = []

    async def supervise(name: str, runner: Runner) -> None:
        try:
            await runner(services, stop)
        except Exception:
            log.exception("component failed; stopping the process", extra={"component": name})
            failed.append(name)
            stop.set()

    log.info("starting", extra={"components": list(parts),
                                "store": store_label(services.config.store)})
    async with anyio.create_task_group() as tg:
        # In the background: webhooks are accepted meanwhile, with the fallback rules.
        tg.start_soon(services.identity.keep_resolving, services.config, services.health,
                      services.clock, transport)
        if reload is not None and config_path is not None:
            tg.start_soon(_watch_reloads, services, reload, config_path)
        async with anyio.create_task_group() as components:
            for name in parts:
                components.start_soon(supervise, name, RUNNERS[name])
        tg.cancel_scope.cancel()
    log.info("stopped", extra={"failed": failed})
    return 1 if failed else 0


def serve(config: Config, role: str, *, clock: Clock = utc_now,
          transport: httpx.AsyncBaseTransport | None = None,
          environ: Mapping[str, str] | None = None, config_path: str | None = None) -> int:
    """``pr-review-agent serve``: run ``role`` until SIGTERM/SIGINT; the exit code.

    SIGHUP re-reads ``config_path`` (see ``apply_reload``); ``environ`` is where secrets
    given by environment and the engine's credentials are read from.
    """
    check_role(role)
    raise_file_limit()

    async def main() -> int:
        stop = asyncio.Event()
        reload = asyncio.Event()
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT)

        force = asyncio.Event()
        shutdown = Shutdown(stop, force)

        def on_hangup() -> None:
            if config_path is None:
                log.warning("SIGHUP ignored: no config file to re-read")
                return
            log.info("SIGHUP: re-reading the config", extra={"path": config_path})
            reload.set()

        for number in signals:
            loop.add_signal_handler(number, shutdown.on_signal, number)
        loop.add_signal_handler(signal.SIGHUP, on_hangup)
        try:
            return await run(config, role, stop, clock=clock, transport=transport, force=force,
                             environ=environ, reload=reload, config_path=config_path,
                             shutdown=shutdown)
        finally:
            for number in (*signals, signal.SIGHUP):
                loop.remove_signal_handler(number)

    settle_garbage_collector()
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        return runner.run(main())
