"""The daemon's components other than the web server: the poller and the workers.

The workers' runner also runs the maintenance loop (re-offering unposted runs, notices,
retention), the early acknowledgement (the 👀 as soon as work is queued) and the check
runs (every trigger on the pull request's checks), since they write to GitHub as the
publisher does.

Each runner is ``runner(services, stop)``: it builds its part from the shared
``Services``, runs until ``stop`` is set and then winds down. ``service.app.daemon`` maps
component names to runners and supervises them.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from service.app.retention import delay_of, forget_deliveries, sweep
from service.config.schema import Config
from service.engine.claude_code import ClaudeCodeEngine
from service.engine.factory import build_engine, engine_homes, verify_engine
from service.engine.sandbox import SandboxError, Verified
from service.intake.poller.loop import Poller
from service.intake.recovery.reader import HookLogReader
from service.intake.webhook.deliveries import DeliveryLog
from service.intake.webhook.delivery import Received, Result
from service.publish.acknowledge import EarlyAck, SkipAcked
from service.publish.checks.loop import CheckRuns
from service.publish.github import GitHubPublisher
from service.publish.retry import republish_pending
from service.review.checkout import Checkouts
from service.review.installations import Installations
from service.review.job import JobRunner
from service.review.pool import WorkerPool
from service.review.routing import build_routes

if TYPE_CHECKING:
    import asyncio

    from service.app.services import Services

log = logging.getLogger(__name__)


async def run_poller(services: Services, stop: asyncio.Event) -> None:
    """The ETag poller: the source of truth, every ``poller.interval_seconds``."""
    config = services.config
    interval = timedelta(seconds=config.poller.interval_seconds)
    services.health.poller_started(interval, services.clock())

    def on_cycle(success: bool, at: datetime) -> None:
        if success:
            services.health.poller_cycle_succeeded(at)
        services.queued.ring()  # whatever the cycle enqueued is claimable now

    # One poller among every process on the store (on PostgreSQL, across hosts): the others
    # stand by and take over when the leader's connection goes.
    leadership = services.store.leadership("poller")
    poller = Poller.from_config(
        config, client=services.github, store=services.store,
        ctx=services.identity.context, clock=services.clock, on_cycle=on_cycle,
        leadership=leadership, on_standby=services.health.poller_standing_by,
        before_poll=(None if services.repo_configs is None
                     else services.repo_configs.refresh_if_stale),
        metrics=services.metrics)
    services.installations.answer(lambda change: poller.request_refresh())
    reader = hook_log_reader(services)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(poller.run)
            if reader is not None:
                tg.start_soon(reader.run)
            await stop.wait()
            tg.cancel_scope.cancel()  # a cycle in flight is redone: only commits move a mark
    finally:
        leadership.close()
        if reader is not None:
            reader.close()


def hook_log_reader(services: Services) -> HookLogReader | None:
    """The webhook delivery log's reader (``poller.delivery_log_seconds``; None when 0),
    elected among the processes on the store like the poller, and taking what it fetches
    through the webhook's own seam."""
    seconds = services.config.poller.delivery_log_seconds
    if not seconds:
        return None
    deliveries = DeliveryLog(services.store, services.identity.context)

    async def ingest(batch: Sequence[Received]) -> list[Result | Exception]:
        results = await anyio.to_thread.run_sync(deliveries.receive_batch, batch)
        for result in results:
            if isinstance(result, Result) and result.change is not None:
                services.installation_changed(result.change)
        services.queued.ring()
        return results

    return HookLogReader(client=services.github, store=services.store, ingest=ingest,
                         clock=services.clock, interval=timedelta(seconds=seconds),
                         leadership=services.store.leadership("hook_log"),
                         metrics=services.metrics)


#: Seconds between re-offers of unposted runs: a run whose host died mid-post (its
#: 30-second publication lease lapsed) is taken up by a live host within this much more.
REOFFER_INTERVAL = 10.0
MAINTENANCE_INTERVAL = 30.0  # seconds between notices and retention sweeps


def build_publisher(services: Services, installations: Installations) -> GitHubPublisher:
    """The publisher the workers hand recorded runs to.

    It reads ``publish`` through the services at each use, so a SIGHUP that flips
    ``publish.dry_run`` takes effect at the next post.
    """
    identity = services.identity
    return GitHubPublisher(
        store=services.store, github=services.github, installations=installations,
        clock=services.clock, config=lambda: services.config.publish,
        mention=services.config.triggers.mention,
        bot_login=lambda: f"{identity.slug}[bot]" if identity.slug else None,
        checks=lambda: services.config.checks,
        repo_config=None if services.repo_configs is None else services.repo_configs.stored,
        review=lambda: services.config.review, summary_comments=True,
        metrics=services.metrics, ask=lambda: services.config.ask)


async def maintain(services: Services, publisher: GitHubPublisher) -> None:
    """Every ``REOFFER_INTERVAL``: re-offer unposted runs (after a crash or a GitHub
    refusal that cleared); every ``MAINTENANCE_INTERVAL``: post the one notice a refused
    mention is owed, and purge the review content of closed pull requests. A failure is
    logged; the next round retries."""
    every = max(1, round(MAINTENANCE_INTERVAL / REOFFER_INTERVAL))
    for tick in itertools.count():
        now = services.clock()
        try:
            await republish_pending(services.store, publisher, now)
            if publisher.summaries is not None:
                await publisher.summaries.update_pending(now)
            if tick % every == 0:
                await publisher.notify_refusals(services.governor, now)
                delay = delay_of(services.config.retention)
                if delay is not None:
                    purged = await anyio.to_thread.run_sync(sweep, services.store, now, delay)
                    if purged:
                        log.info("retention purged the content of %d run(s)", purged)
                forgotten = await anyio.to_thread.run_sync(forget_deliveries, services.store,
                                                           now)
                if forgotten:
                    log.info("forgot %d delivery id(s) GitHub can no longer redeliver",
                             forgotten)
        except Exception:
            log.exception("maintenance round failed; retrying in %ss", REOFFER_INTERVAL)
        await anyio.sleep(REOFFER_INTERVAL)


def check_engine_isolation(config: Config, config_path: str | None,
                           environ: Mapping[str, str]) -> Verified | None:
    """The configured engine's sandbox, proven on this host (``verify_engine``); None for
    an engine that runs no child. Raises ``SandboxError`` saying what to change."""
    engine = build_engine(config.engine, environ, home_root=engine_homes(config))
    return verify_engine(engine, config, config_path, environ)


def engine_isolation_problem(config: Config, config_path: str | None,
                             environ: Mapping[str, str]) -> str | None:
    """Why the configured engine may not start here, or None (and the proof logged): the
    workers and ``review`` refuse to run an engine that could read a secret."""
    try:
        verified = check_engine_isolation(config, config_path, environ)
    except SandboxError as exc:
        return str(exc)
    if verified is not None:
        log.info(verified.describe())
        if verified.abi is None:
            log.warning("engine.isolation is none: a pull request that persuades the model "
                        "can have it read any file this user can read")
    return None


async def run_workers(services: Services, stop: asyncio.Event) -> None:
    """``workers.count`` workers claiming through the governor, and the maintenance loop."""
    config = services.config
    routes = build_routes(config.engine, services.environ, clock=services.clock,
                          home_root=engine_homes(config))
    engine = routes[-1].engine
    checkouts = Checkouts(Path(config.store.path).parent / "checkouts")
    # Worktrees and engine HOMEs left by a process that died mid-run hold nothing anyone
    # will read.
    swept = await anyio.to_thread.run_sync(checkouts.sweep)
    if isinstance(engine, ClaudeCodeEngine):
        swept += await anyio.to_thread.run_sync(engine.sandbox.sweep_homes)
    if swept:
        log.info("removed %d worktree(s) and engine home(s) left by an earlier process",
                 len(swept))
    installations = Installations(services.store, services.github)
    publisher = build_publisher(services, installations)
    # The 👀 goes out when work is queued, not when a worker is free to claim it.
    early = EarlyAck(store=services.store, acker=publisher, clock=services.clock)
    job = JobRunner(
        store=services.store, leasing=services.leasing, governor=services.governor,
        github=services.github, installations=installations, checkouts=checkouts,
        engine=engine, routes=routes, publisher=SkipAcked(publisher, early),
        clock=services.clock,
        config=config, health=services.health,
        repo_configs=services.repo_configs, metrics=services.metrics)
    pool = WorkerPool(store=services.store, leasing=services.leasing,
                      governor=services.governor, job=job, clock=services.clock,
                      count=config.workers.count, health=services.health,
                      metrics=services.metrics)
    # Every trigger on the pull request's checks, from queued to how it ended.
    check_runs = CheckRuns(
        store=services.store, github=services.github, installations=installations,
        governor=services.governor, config=lambda: services.config.checks,
        publish=lambda: services.config.publish, clock=services.clock,
        max_attempts=services.leasing.max_attempts, health=services.health)
    for wake in (pool.wake, early.wake, check_runs.wake):
        services.queued.answer(wake)
    async with anyio.create_task_group() as tg:
        tg.start_soon(maintain, services, publisher)
        tg.start_soon(early.run, stop)
        tg.start_soon(check_runs.run, stop)
        await pool.run(stop, services.force)  # a second signal cancels running jobs
        tg.cancel_scope.cancel()
