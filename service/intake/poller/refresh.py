"""Which repositories the poller polls: the installations and their repositories listed
again when due (at the first cycle, every ``refresh_every`` cycles, at the cycle after
one that failed in part, and as soon as ``request()`` asks), and a pre-upgrade store's
unqualified watermarks adopted once for the one repository configured."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import datetime

from service.github.client import GitHubClient
from service.storage.database import Database
from service.storage.watermarks import Watermarks

from .targets import Target, discover, missing_from, record_repositories, select_targets

log = logging.getLogger(__name__)


class TargetRefresh:
    """The poller's targets and when they are listed again. ``request`` is safe from any
    thread (the webhook receiver calls it on ``installation`` events)."""

    def __init__(self, client: GitHubClient, store: Database, allowlist: Sequence[str],
                 refresh_every: int) -> None:
        if refresh_every < 1:
            raise ValueError("refresh_every must be at least 1")
        self._client = client
        self._store = store
        self._allowlist = tuple(allowlist)
        self._every = refresh_every
        self.targets: list[Target] = []
        #: Each installation's account and its type, from the last listing that had them.
        self.accounts: dict[int, tuple[str, str]] = {}
        self._cycles_since = 0
        self._once = False
        self._legacy_done = False
        # A generation counter under a lock: requests may come from another thread.
        self._lock = threading.Lock()
        self._requested = 0
        self._done = 0

    def request(self) -> None:
        with self._lock:
            self._requested += 1

    def requested(self) -> bool:
        """Whether a request has come since the last refresh began."""
        with self._lock:
            return self._requested > self._done

    def counted(self) -> None:
        """One more cycle since the last refresh."""
        self._cycles_since += 1

    def due(self) -> bool:
        return not self._once or self.requested() or self._cycles_since >= self._every

    async def refresh(self, now: datetime, failures: dict[str, str]) -> list[Target]:
        """List the installations and repositories again; what could not be listed goes
        into ``failures``. The new targets."""
        with self._lock:
            generation = self._requested
        found = await discover(self._client)
        failures.update(found.failures)
        targets = select_targets(found, self._allowlist, self.targets)
        self.accounts.update(found.accounts)
        if found.installations is not None:
            await self._store.run(record_repositories, self._store, found, now)
        for name in missing_from(targets, self._allowlist):
            log.warning("configured repository is not visible to any installation",
                        extra={"repo": name})
        await self._adopt_legacy(targets)
        self.targets = targets
        self._once = True
        # A refresh that could not list everything is tried again at the next cycle: its
        # partial view (at start, perhaps no targets at all) must not stand for
        # refresh_every cycles (50 minutes at the default interval).
        self._cycles_since = self._every if found.failures else 0
        with self._lock:
            self._done = max(self._done, generation)
        return targets

    async def _adopt_legacy(self, targets: Sequence[Target]) -> None:
        """Adopt a pre-upgrade store's unqualified watermarks, once, before the first poll.

        Only when exactly one repository is configured: the unqualified rows describe the
        one repository that was polling, and guessing which of several it was could start
        another from a mark it never polled (STORAGE.md, "Watermarks").
        """
        if self._legacy_done:
            return
        if len(self._allowlist) != 1:
            self._legacy_done = True
            return
        wanted = self._allowlist[0].casefold()
        match = next((t.repo for t in targets if t.repo.casefold() == wanted), None)
        if match is None:
            return  # not visible yet; try again at the next refresh
        await self._store.run(Watermarks(self._store).adopt_legacy, match)
        self._legacy_done = True
