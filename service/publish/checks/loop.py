"""The check-run loop: every trigger on the pull request's checks, within seconds.

One pass (``sync``), at every wake-up (something was queued) and every ``INTERVAL``:

1. **Open** a ``queued`` check run for every pending or claimed trigger that has none
   yet, on the head it is about (a mention's: the pull request's head now, read from
   GitHub); a trigger superseded or cancelled before any was opened gets one that says
   so at once.
2. **Word the waits** of every pending trigger whose check run is open: waiting for the
   plan's usage limit to reset, for a retry after a failed attempt, for the budget (the
   governor's own decision, read without reserving — so every process words it alike),
   or simply for a worker.
3. **End** the check runs of triggers the queue ended without a job: superseded by a
   newer head, cancelled because the pull request closed, abandoned after every attempt.
4. **Push** every change GitHub has not been told (``service.publish.checks.push``).

In a dry run nothing is pushed. Every failure leaves the row as it was, and the next pass
tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Final

import httpx

from service.budget.governor import Governor
from service.budget.refusal import Refusal
from service.config.posting import ChecksConfig, PublishConfig
from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.pulls import read_pull
from service.observe.health import Health
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.checks.push import STALE, Pusher
from service.runtime.nap import Nap
from service.storage import checks
from service.storage import queue as queue_table
from service.storage.checks import CheckState, Ended, Untracked, Waiting
from service.storage.database import Database
from service.storage.queue import (
    ABANDONED,
    CANCELLED,
    PENDING,
    SUPERSEDED,
    Claim,
    as_candidate,
)

log = logging.getLogger(__name__)

#: Seconds between passes when nothing wakes the loop.
INTERVAL: Final = 2.0
#: Rows looked at per step and pass.
BATCH: Final = 50
#: Passes after which waits are worded again although nothing waiting changed.
WAITS_EVERY: Final = 5
#: A mention whose pull request could not be read is tried again after this long.
HEAD_RETRY: Final = timedelta(minutes=1)
#: Stop reasons after which a pending row waits for a retry.
RETRIED: Final = frozenset({"infrastructure", "engine_unavailable", "lost"})


def _what(command: str) -> str:
    return "description" if command == "describe" else "review"


class CheckRuns:
    """Opens, words, ends and pushes check runs (the module docstring)."""

    def __init__(self, *, store: Database, github: GitHubClient,
                 installations: Callable[[str], Awaitable[int]], governor: Governor,
                 config: Callable[[], ChecksConfig], publish: Callable[[], PublishConfig],
                 clock: Callable[[], datetime], max_attempts: int,
                 health: Health | None = None, interval: float = INTERVAL) -> None:
        self._store = store
        self._github = github
        self._installations = installations
        self._governor = governor
        self._config = config
        self._publish = publish
        self._clock = clock
        self._max_attempts = max_attempts
        self._health = health
        self._interval = interval
        self._marks = CheckMarks(config)
        self._pusher = Pusher(store=store, github=github, installations=installations,
                              clock=clock, health=health)
        self._unread: dict[str, datetime] = {}
        self._waits_seen: tuple[object, ...] = ()
        self._passes = 0  # a mention whose head GitHub did not give
        self._nap = Nap()

    def wake(self) -> None:
        """Look now: a trigger was queued. Safe from any thread."""
        self._nap.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until ``stop`` is set."""
        if self._health is not None and self._config().enabled:
            self._health.check_runs_started()
        while not stop.is_set():
            self._nap.begin()
            try:
                await self.sync(self._clock())
            except Exception:
                log.exception("check-run pass failed; the next pass tries again")
            await self._nap(self._interval, stop)

    async def sync(self, now: datetime) -> int:
        """One pass (the module docstring); how many check runs GitHub was told of.
        Nothing at all while ``checks.enabled`` is off."""
        if not self._config().enabled:
            return 0
        await self._open(now)
        await self._word_waits(now)
        await self._end_quiet(now)
        if self._publish().dry_run:
            return 0
        return await self._pusher.push(now)

    # -- 1. open ---------------------------------------------------------------------------

    async def _open(self, now: datetime) -> None:
        new = await self._store.read_async(checks.untracked, now - STALE, BATCH)
        self._unread = {k: t for k, t in self._unread.items() if now - t < HEAD_RETRY}
        opened: list[tuple[Untracked, str]] = []
        for row in new:
            tried = self._unread.get(row.dedupe_key)
            if row.head_sha is None and tried is not None and now - tried < HEAD_RETRY:
                continue
            head = row.head_sha or await self._head_of(row)
            if head is not None:
                opened.append((row, head))
                self._unread.pop(row.dedupe_key, None)
            else:
                self._unread[row.dedupe_key] = now

        def work() -> None:
            with self._store.transaction() as tx:
                for row, head in opened:
                    target = self._marks.target(row.dedupe_key, row.command, row.repo,
                                                row.pr_number, head)
                    checks.show_if_new(tx, target, self._opening(row), now)
        if opened:
            await self._store.run(work)

    @staticmethod
    def _opening(row: Untracked) -> CheckState:
        if row.status == SUPERSEDED:
            return text.superseded(None, row.charged)
        if row.status == CANCELLED:
            return text.closed(row.merged, row.charged)
        return text.queued(_what(row.command))

    async def _head_of(self, row: Untracked) -> str | None:
        """A mention's head: the pull request's, now. None (tried again next pass) when
        GitHub cannot say."""
        try:
            installation = await self._installations(row.repo)
            return (await read_pull(self._github, installation, row.repo, row.pr_number)
                    ).head_sha
        except (GitHubError, httpx.HTTPError) as exc:
            log.info("no check run yet: the pull request could not be read (%s)", exc,
                     extra={"dedupe_key": row.dedupe_key, "repo": row.repo,
                            "pr": row.pr_number})
            return None

    # -- 2. the waits ----------------------------------------------------------------------

    async def _word_waits(self, now: datetime) -> None:
        rows = await self._store.read_async(self._waiting_claims, BATCH)
        # The budget's answer is the costly part: asked again when what waits changed, and
        # every few passes for what the clock alone changes (a window freeing up).
        seen = tuple((w.dedupe_key, w.attempts, w.not_before, w.last_stop_reason)
                     for w, _ in rows)
        self._passes += 1
        if not rows or (seen == self._waits_seen and self._passes % WAITS_EVERY):
            return
        self._waits_seen = seen
        refusals = await self._store.run(self._governor.waiting, [c for _, c in rows], now)
        states = [(w.dedupe_key, self._wait_state(w, refusal, now))
                  for (w, _), refusal in zip(rows, refusals, strict=True)]

        def work() -> None:
            with self._store.transaction() as tx:
                for key, state in states:
                    row = queue_table.row(tx, key)  # still waiting, now that the lock is held
                    if row is not None and row.status == PENDING:
                        checks.show_open(tx, key, state, now)
        await self._store.run(work)

    @staticmethod
    def _waiting_claims(tx: Any, limit: int) -> list[tuple[Waiting, Claim]]:
        found = []
        for waiting in checks.waiting(tx, limit):
            row = queue_table.row(tx, waiting.dedupe_key)
            if row is not None:  # a budget question is asked of a claim: not a lease
                found.append((waiting, as_candidate(row)))
        return found

    def _wait_state(self, w: Waiting, refusal: Refusal | None, now: datetime) -> CheckState:
        what = _what(w.command)
        later = w.not_before is not None and w.not_before > now
        if later and w.last_stop_reason == "usage_limit":
            assert w.not_before is not None
            return text.waiting_for_plan(what, w.not_before, now)
        retrying = bool(w.attempts) and w.last_stop_reason in RETRIED
        # A retry's own delay is the first thing it waits for; once that has passed, the
        # budget's refusal is the real reason it still waits, and wins over the retry
        # wording (which would say "as soon as a worker is free" for as long as the
        # window stays shut).
        if retrying and later:
            return self._retry_state(w, what, now)
        if refusal is not None:
            return text.waiting_for_budget(what, refusal.reason, refusal.window,
                                           refusal.frees_at, now)
        if retrying:
            return self._retry_state(w, what, now)
        return text.queued(what)

    def _retry_state(self, w: Waiting, what: str, now: datetime) -> CheckState:
        return text.waiting_for_retry(what, w.last_stop_reason, attempts=w.attempts,
                                      max_attempts=self._max_attempts,
                                      retry_at=w.not_before, now=now)

    # -- 3. endings without a job ----------------------------------------------------------

    async def _end_quiet(self, now: datetime) -> None:
        ended = await self._store.read_async(checks.ended_elsewhere, BATCH)
        if not ended:
            return

        def work() -> None:
            with self._store.transaction() as tx:
                for row in ended:
                    checks.show_open(tx, row.dedupe_key, self._ending(row), now)
        await self._store.run(work)

    @staticmethod
    def _ending(row: Ended) -> CheckState:
        if row.status == ABANDONED:
            return text.abandoned(row.last_stop_reason, row.attempts, row.charged)
        if row.status == CANCELLED:
            return text.closed(row.merged, row.charged)
        return text.superseded(None, row.charged)
