"""Where each of a repository's streams stands: its watermark, the boundary at the mark's
own second, whether a fetch of it is unfinished. What the poller keeps between polls.

The watermark is durable (``service.storage.watermarks``); the boundary and the
unfinished set live in memory, and cycle.py's docstring says why losing them in a crash
loses nothing. Store calls run off the event loop (``Database.run``): SQLite blocks,
sometimes for the whole busy timeout, and the loop also serves webhooks.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime

from service.storage import repositories
from service.storage.database import Database
from service.storage.watermarks import Watermarks, watermark_key

from .streams import Boundary


def seed_key(stream: str, repo: str) -> str:
    """The watermark row recording where a cold start put ``stream``'s mark on ``repo``
    (``seed_comments:o/r``): while the mark is still there, its items predate the install."""
    return watermark_key(f"seed_{stream}", repo)


class StreamMarks:
    """The marks, boundaries and unfinished fetches of every stream one poller polls."""

    def __init__(self, store: Database) -> None:
        self._store = store
        self._watermarks = Watermarks(store)
        self._boundaries: dict[str, Boundary] = {}  # by watermark key
        self._unfinished: set[str] = set()          # watermark keys of streams in flight

    def begin(self, key: str) -> bool:
        """Mark ``key``'s stream unfinished, before anything is fetched; True when the last
        fetch of it never finished (then it is fetched in full, not conditionally)."""
        forced = key in self._unfinished
        self._unfinished.add(key)
        return forced

    def finish(self, key: str) -> None:
        self._unfinished.discard(key)

    async def watermark(self, key: str) -> datetime | None:
        return await self._store.run(self._watermarks.get, key)

    async def advance(self, key: str, at: datetime) -> datetime:
        return await self._store.run(self._watermarks.advance, key, at)

    async def boundary(self, key: str, seed: str, mark: datetime) -> Boundary | None:
        """What this process knows was considered at ``mark``'s own second.

        Nothing, after a restart. If a regular poll set the mark, every item at it was
        decided and applied before the mark moved there, and applying a decision again is
        an idempotent insert on its dedupe key: an empty boundary replays them at no cost
        and finds any that arrived in that second after the poll. A cold start's mark
        (``seed`` still records it) stays unknown: its items were never decided and
        predate the install, so they keep counting as considered.
        """
        boundary = self._boundaries.get(key)
        if boundary is not None:
            return boundary
        inherited = await self.watermark(seed)
        if inherited is None or inherited >= mark:
            # A cold start's mark, or one this agent inherited (adopted from the daemon
            # before it, or written by a version that did not record seeds).
            return None
        return Boundary(mark)

    def set_boundary(self, key: str, boundary: Boundary | None) -> None:
        if boundary is None:
            self._boundaries.pop(key, None)
        else:
            self._boundaries[key] = boundary

    async def move(self, key: str, seed: str, mark: datetime, new_mark: datetime) -> datetime:
        """Advance the mark; the first time a store without a seed row moves past the mark
        it inherited, that mark is recorded as the seed (``boundary``)."""
        if new_mark <= mark:
            return mark
        if await self.watermark(seed) is None:
            await self.advance(seed, mark)
        return await self.advance(key, new_mark)

    async def watched_since(self, repo: str, floor: datetime | None) -> datetime | None:
        """Since when the App has watched ``repo``: when it was recorded as installed,
        but no earlier than ``floor``.

        A large installation's first sweep takes hours (docs/POLLER.md, "The schedule"),
        and with webhooks off a repository's first poll is the first anyone looks at it:
        seeding it at its newest item would take what happened since the App was
        installed for backlog. Seeding it at this instant keeps the backlog out (it
        predates the install) and decides the rest. The floor bounds how much a first
        poll may take: a repository recorded long ago but polled only now (added to the
        allowlist, say) is a cold start, not a day of triggers.
        """
        if floor is None:
            return None
        added = await self._store.read_async(repositories.added_at, repo)
        return None if added is None else max(added, floor)

    def set_seed_boundary(self, key: str, newest: datetime,
                          items: Sequence[tuple[Hashable, datetime]], *,
                          complete: bool) -> None:
        """The boundary a seed leaves: what was at the newest instant, if the seed's one
        page showed all of it; otherwise none (everything at the mark counts as seen)."""
        self.set_boundary(key, Boundary(newest, frozenset(k for k, at in items if at == newest))
                          if complete else None)
