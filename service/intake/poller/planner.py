"""``CyclePlanner``: which of an installation's repositories a cycle polls, from its
search (``fanin``) and the sweep (``schedule``), and what it remembers between cycles.

It remembers when each repository was last polled successfully (read from
``repository_polls`` at the first cycle, so a restart does not sweep everything at
once) and, per installation, where the last whole search started (``watermarks``,
``search:{installation}``, forward only), so a restarted poller searches from there.

A repository polled for the first time is seeded like a cold start, whatever brought it
(the sweep or a search hit), but from when the App began watching it: what happened before
is the install's backlog, what happened since is decided. The first sweep of a large
installation takes hours, and with webhooks off nothing else sees those repositories
(``Chosen.seed_floor``; docs/POLLER.md#cold-start).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from service.github.client import GitHubClient
from service.storage import repository_polls
from service.storage.database import Database
from service.storage.watermarks import Watermarks, search_key

from . import schedule
from .fanin import OVERLAP, search
from .targets import Target

__all__ = ["SEARCH_EVERY", "Chosen", "CyclePlanner"]

#: The least time between two searches of one installation.
SEARCH_EVERY = timedelta(minutes=1)

log = logging.getLogger(__name__)


@dataclass
class Chosen:
    """One installation's cycle: the repositories to poll, how many the search named, and
    whether the search answered."""

    targets: list[Target]
    hinted: int = 0
    searched: bool = False
    #: How far back a repository's first poll looks for what changed after it was
    #: installed: twice the sweep, the longest any repository waits for its turn.
    seed_floor: datetime | None = None


class CyclePlanner:
    """Plans each installation's cycle; ``polled`` records the outcome."""

    def __init__(self, client: GitHubClient, store: Database, interval: timedelta) -> None:
        self._client = client
        self._store = store
        self._interval = interval
        self._last: dict[str, datetime] | None = None
        self._searched: dict[int, datetime] = {}  # when each installation last searched

    async def plan(self, installation_id: int, targets: Sequence[Target],
                   account: tuple[str, str] | None, limit: int, now: datetime) -> Chosen:
        """The repositories of ``targets`` to poll at ``now`` (``limit``: the
        installation's hourly rate limit, for the sweep's share)."""
        if self._last is None:
            self._last = await self._store.read_async(repository_polls.succeeded)
        last = self._last
        hits: dict[str, datetime] = {}
        searched = False
        if account is not None and self._may_search(installation_id, now):
            self._searched[installation_id] = now
            key = search_key(installation_id)
            stored = await self._store.run(Watermarks(self._store).get, key)
            since = now - OVERLAP if stored is None else min(stored - OVERLAP, now - OVERLAP)
            found = await search(self._client, installation_id, *account, since)
            if found is not None:
                hits, searched = found.repositories, True
                if found.whole:
                    await self._store.run(Watermarks(self._store).advance, key, now)
        names = [t.repo for t in targets]
        sweep = schedule.sweep_interval(len(names), limit, self._interval)
        hints = schedule.hinted(hits, last)
        if sweep <= self._interval:
            # The share pays for every repository every cycle: polled as always (a cycle
            # woken early by an installation event included).
            chosen = schedule.choose(names, {}, hints, now, sweep=sweep, quota=len(names))
        else:
            # A repository swept a little early is no loss; one that misses its turn by a
            # moment's jitter waits a whole cycle more.
            chosen = schedule.choose(
                names, last, hints, now, sweep=sweep - self._interval / 10,
                quota=schedule.sweep_quota(len(names), sweep, self._interval))
        by_name = {t.repo: t for t in targets}
        return Chosen([by_name[r] for r in chosen], hinted=len(set(hints) & set(by_name)),
                      searched=searched, seed_floor=now - 2 * max(sweep, self._interval))

    def _may_search(self, installation_id: int, now: datetime) -> bool:
        """At most one search a ``SEARCH_EVERY`` per installation, and none while its
        search bucket is spent: the client would wait out the bucket's reset inside the
        cycle (30 a minute; a poller on a short interval would spend it)."""
        last = self._searched.get(installation_id)
        if last is not None and now - last < SEARCH_EVERY:
            return False
        bucket = self._client.rate_limit(installation_id, "search")
        return bucket is None or bucket.remaining > 1 or bucket.reset <= now

    def polled(self, repo: str, now: datetime) -> None:
        """``repo`` was polled successfully at ``now``."""
        if self._last is not None:
            self._last[repo] = now
