"""The poll loop: targets, pacing, failures, and the wait between cycles.

``Poller.poll_once(now)`` is one cycle: refresh the installations and repositories when
due, then poll every repository whose installation is not held back by its rate limit.
``Poller.run()`` repeats it, sleeping the interval (or longer, when pacing says so)
between cycles, and wakes early when ``request_refresh()`` is called.

What ends a cycle, and what ends the loop:

- a GitHub failure (``GitHubError``) fails that repository, is logged, and the cycle goes
  on with the next one; ``RateLimited`` holds the whole installation until GitHub's time;
- store contention (``service.storage.errors.is_contention``: another process holds the write
  lock past the busy timeout) or an unreachable store (``is_unavailable``: PostgreSQL
  restarting or failing over) skips the rest of the cycle with a log line; the next
  cycle repeats the unfinished work, because nothing was advanced;
- any other error — a store fault, a bug — is logged and re-raised: the loop ends
  loudly rather than poll on with a store it cannot trust.

Each cycle reports to ``on_cycle(success, at)`` (the health check's poller freshness).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from service.config.schema import Config
from service.github.client import GitHubClient
from service.intake.rules.decisions import TriggerContext
from service.observe.metrics.instruments import Metrics
from service.runtime.nap import Nap
from service.storage import repository_polls
from service.storage.database import Database, Leadership
from service.storage.errors import is_contention, is_unavailable

from .batch import poll_chosen
from .cycle import RepositoryPoller, RepositoryReport
from .pacing import PacingPolicy, estimate_cost, hold_until, next_poll
from .pages import Tally
from .planner import CyclePlanner
from .refresh import TargetRefresh
from .streams import PullMemory
from .targets import Target

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
Sleep = Callable[[float], Awaitable[None]]
OnCycle = Callable[[bool, datetime], None]
#: Called for each repository before its streams are polled (the repository config's refresh).
BeforePoll = Callable[[int, str, datetime], Awaitable[None]]

DEFAULT_INTERVAL = timedelta(seconds=300)
#: An installation's hourly limit before GitHub has said it (its smallest).
DEFAULT_LIMIT = 5000
DEFAULT_REFRESH_EVERY = 10


@dataclass
class CycleReport:
    """What one cycle did. ``success`` is False when any repository or listing failed,
    or the cycle was skipped for store contention (``skipped``)."""

    at: datetime
    next_at: datetime
    success: bool = True
    skipped: bool = False
    refreshed: bool = False
    repositories: list[RepositoryReport] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)   # what failed -> why
    held: dict[int, datetime] = field(default_factory=dict)  # installation -> until
    hinted: int = 0  # repositories polled because search saw a change in them

    @property
    def enqueued(self) -> list[str]:
        return [key for r in self.repositories for key in r.enqueued]

    @property
    def tally(self) -> Tally:
        total = Tally()
        for r in self.repositories:
            total.add(r.tally)
        return total


def _require_aware(at: datetime) -> None:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"naive datetime {at.isoformat()} refused: times must be aware")


class Poller:
    """The source of truth for ingest, and the only code that advances watermarks.

    ``repositories`` (``github.repositories``) limits polling to those names; empty polls
    every repository of every installation. ``refresh_every``: cycles between refreshes
    of the installations and their repositories (also done at the first cycle, after
    ``request_refresh()``, and at the cycle after a refresh that failed in part).
    ``clock`` and ``sleep`` are the loop's only sense of time.
    """

    def __init__(
        self,
        *,
        client: GitHubClient,
        store: Database,
        ctx: TriggerContext | Callable[[], TriggerContext],
        clock: Clock,
        interval: timedelta = DEFAULT_INTERVAL,
        repositories: Sequence[str] = (),
        sleep: Sleep = asyncio.sleep,
        on_cycle: OnCycle | None = None,
        refresh_every: int = DEFAULT_REFRESH_EVERY,
        pacing: PacingPolicy | None = None,
        memory: PullMemory | None = None,
        leadership: Leadership | None = None,
        on_standby: Callable[[datetime], None] | None = None,
        before_poll: BeforePoll | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if interval <= timedelta(0):
            raise ValueError("interval must be positive")
        self._client = client
        self._store = store
        self._clock = clock
        self._interval = interval
        self._on_cycle = on_cycle
        self._metrics = metrics
        self._leadership = leadership
        self._on_standby = on_standby
        self._before_poll = before_poll
        self._standing_by: bool | None = None  # None: not yet asked
        self._pacing = pacing or PacingPolicy()
        self._streams = RepositoryPoller(client, store, ctx, memory=memory)
        self._planner = CyclePlanner(client, store, interval)
        self._refresh = TargetRefresh(client, store, repositories, refresh_every)
        self._held: dict[int, datetime] = {}
        self._last_cost: dict[int, int] = {}
        self._nap = Nap(sleep)

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        client: GitHubClient,
        store: Database,
        ctx: TriggerContext | Callable[[], TriggerContext],
        clock: Clock,
        sleep: Sleep = asyncio.sleep,
        on_cycle: OnCycle | None = None,
        leadership: Leadership | None = None,
        on_standby: Callable[[datetime], None] | None = None,
        before_poll: BeforePoll | None = None,
        metrics: Metrics | None = None,
    ) -> Poller:
        """The production wiring: ``poller.interval_seconds`` and ``github.repositories``."""
        return cls(client=client, store=store, ctx=ctx, clock=clock,
                   interval=timedelta(seconds=config.poller.interval_seconds),
                   repositories=config.github.repositories, sleep=sleep, on_cycle=on_cycle,
                   leadership=leadership, on_standby=on_standby, before_poll=before_poll,
                   metrics=metrics)

    @property
    def targets(self) -> list[Target]:
        """The repositories the last refresh chose to poll."""
        return list(self._refresh.targets)

    def request_refresh(self) -> None:
        """Refresh installations and repositories before the next cycle, and start that
        cycle now. Safe from any thread (the webhook receiver calls it on
        ``installation`` and ``installation_repositories`` events)."""
        self._refresh.request()
        self._nap.wake()

    # -- one cycle -------------------------------------------------------------------------

    async def poll_once(self, now: datetime) -> CycleReport:
        """Run one cycle at ``now`` and report it (also to ``on_cycle``)."""
        _require_aware(now)
        report = CycleReport(at=now, next_at=now + self._interval)
        try:
            await self._cycle(now, report)
        except Exception as exc:
            if is_unavailable(exc):
                log.warning("store unreachable; skipping the rest of this poll cycle",
                            extra={"error": type(exc).__name__})
            elif is_contention(exc):
                log.warning("store busy; skipping the rest of this poll cycle",
                            extra={"error": str(exc)})
            else:
                log.error("poll cycle failed; stopping the poller", exc_info=True)
                self._report(False, now)
                raise
            report.skipped = True
        report.success = not report.skipped and not report.failures
        await self._record_polls(report, now)
        report.next_at = self._next_at(now)
        self._refresh.counted()
        self._report(report.success, now)
        if self._metrics is not None:
            tally = report.tally
            self._metrics.poll_cycle(
                "skipped" if report.skipped else "ok" if report.success else "failed",
                full=tally.requests - tally.not_modified, not_modified=tally.not_modified)
        return report

    async def poll_repository(
        self, repo: str, installation_id: int, now: datetime,
    ) -> RepositoryReport:
        """Poll one repository as ``installation_id`` (errors propagate to the caller)."""
        _require_aware(now)
        return await self._streams.poll(repo, installation_id, now)

    async def _cycle(self, now: datetime, report: CycleReport) -> None:
        if self._refresh.due():
            await self._refreshed(now, report)
        for installation_id, group in itertools.groupby(
                self._refresh.targets, key=lambda t: t.installation_id):
            await self._poll_installation(installation_id, list(group), now, report)

    async def _poll_installation(
        self, installation_id: int, targets: list[Target], now: datetime, report: CycleReport,
    ) -> None:
        held = self._held.get(installation_id)
        if held is not None and held > now:
            report.held[installation_id] = held
            return
        self._held.pop(installation_id, None)
        cost = estimate_cost(self._last_cost.get(installation_id), 1)
        hold = hold_until(self._client.rate_limit(installation_id), cost, now, self._pacing)
        if hold is not None:
            self._hold(installation_id, hold, report, "rate limit nearly spent",
                       level=logging.WARNING)
            return
        limit = self._client.rate_limit(installation_id)
        chosen = await self._planner.plan(
            installation_id, targets, self._refresh.accounts.get(installation_id),
            limit.limit if limit is not None else DEFAULT_LIMIT, now)
        report.hinted += chosen.hinted
        batch = await poll_chosen(self._streams, self._planner, installation_id, chosen, now,
                                  before_poll=self._before_poll)
        report.repositories += batch.polled
        report.failures.update(batch.failures)
        if batch.limited is not None:
            self._hold(installation_id, max(batch.limited.until, now), report,
                       "rate limited", level=logging.WARNING)
            return
        self._last_cost[installation_id] = batch.counted
        pace = next_poll(self._client.rate_limit(installation_id),
                         estimate_cost(batch.counted, len(chosen.targets)), self._interval,
                         now, self._pacing)
        if pace.next_at > now + self._interval:
            self._hold(installation_id, pace.next_at, report, f"pacing ({pace.reason})",
                       level=logging.INFO)

    async def _record_polls(self, report: CycleReport, now: datetime) -> None:
        """Each repository polled this cycle, and how it went, for the status page; a
        store that refuses the write costs the record, never the poll."""
        # ``failures`` also names whole installations ("installation 31"): only an
        # ``owner/name`` key is a repository.
        polls = [(r.repo, None) for r in report.repositories] + [
            (repo, why) for repo, why in report.failures.items() if "/" in repo]
        if not polls:
            return

        try:
            await self._store.write_async(repository_polls.record, polls, now)
        except Exception as exc:
            log.warning("could not record the repositories' last polls",
                        extra={"error": type(exc).__name__})

    def _hold(self, installation_id: int, until: datetime, report: CycleReport,
              why: str, *, level: int) -> None:
        self._held[installation_id] = until
        report.held[installation_id] = until
        log.log(level, "holding an installation's polls back", extra={
            "installation_id": installation_id, "until": until.isoformat(), "why": why})

    def _next_at(self, now: datetime) -> datetime:
        """The next cycle: after the interval, or, when every installation is held
        beyond that, when the first of them is released."""
        normal = now + self._interval
        installations = {t.installation_id for t in self._refresh.targets}
        holds = [self._held.get(i) for i in installations]
        if installations and all(h is not None and h > normal for h in holds):
            return min(h for h in holds if h is not None)
        return normal

    def _report(self, success: bool, at: datetime) -> None:
        if self._on_cycle is None:
            return
        try:
            self._on_cycle(success, at)
        except Exception:
            # The health callback must not be able to stop ingest.
            log.exception("the poller's on_cycle callback failed")

    # -- installations and repositories ------------------------------------------------------

    async def _refreshed(self, now: datetime, report: CycleReport) -> None:
        targets = await self._refresh.refresh(now, report.failures)
        installations = {t.installation_id for t in targets}
        for table in (self._held, self._last_cost):
            for gone in set(table) - installations:
                del table[gone]
        report.refreshed = True
        log.info("poll targets refreshed", extra={"repositories": len(targets),
                                                  "installations": len(installations)})

    # -- the loop ------------------------------------------------------------------------

    def _now(self) -> datetime:
        now = self._clock()
        _require_aware(now)
        return now

    async def run(self, *, cycles: int | None = None) -> None:
        """Poll until cancelled (or for ``cycles`` cycles), waiting between cycles."""
        if cycles is not None and cycles < 1:
            raise ValueError("cycles must be at least 1")
        done = 0
        while True:
            if not await self._leads():
                await self._pause(self._interval.total_seconds())
                continue
            report = await self.poll_once(self._now())
            done += 1
            if cycles is not None and done >= cycles:
                return
            wait = (report.next_at - self._now()).total_seconds()
            await self._pause(max(wait, 0.0))

    async def _leads(self) -> bool:
        """Whether this process is the one poller among those sharing the store.

        A standby asks again at every interval, so it takes over within one interval of
        the leader's connection dying (the lock goes with it).
        """
        if self._leadership is None:
            return True
        leading = await self._store.run(self._leadership.lead)
        if self._standing_by is None or leading == self._standing_by:
            # The first answer and every change of role are worth one line each.
            log.info("poller leads" if leading else
                     "poller is standing by: another process polls this store",
                     extra={"takeover": leading and self._standing_by is True})
        self._standing_by = not leading
        if not leading and self._on_standby is not None:
            self._on_standby(self._now())
        return leading

    async def _pause(self, seconds: float) -> None:
        """Sleep ``seconds`` with the injected sleep, or less if a refresh is requested."""
        self._nap.begin()
        if self._refresh.requested():
            return
        await self._nap(seconds)
