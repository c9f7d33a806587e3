"""Re-offering runs that were recorded but never published.

A run is offered again while it has no ``publish_outcome``, no ``publish_failed_at``, its
content is still held, and no attempt holds its publication lease: the worker's own
attempt failed for a transient reason, or the process stopped (crashed, restarted)
between recording the run and publishing it. The marker check in every attempt makes the
re-offer safe even when the earlier attempt did post: it is recorded, not posted again.
An operator clearing ``publish_failed_at`` (docs/OPERATIONS.md) puts a given-up run back
into this set.

Call ``republish_pending`` periodically (the daemon's publisher loop, and once at start,
which is what "after a restart" means).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Final, Protocol

from service.storage import runs
from service.storage.database import Database

log = logging.getLogger(__name__)

#: Runs offered per call; the rest wait for the next call.
BATCH: Final = 20


class KeyPublisher(Protocol):
    async def publish_key(self, key: str) -> object:
        """One publication attempt for the run recorded under ``key``."""
        ...


async def pending_keys(store: Database, now: datetime, limit: int = BATCH) -> list[str]:
    """Runs waiting to be published at ``now``, oldest first."""
    def work() -> list[str]:
        with store.read() as tx:
            return runs.pending(tx, now, limit)
    return await store.run(work)


async def republish_pending(store: Database, publisher: KeyPublisher, now: datetime, *,
                            limit: int = BATCH) -> int:
    """Offer every run still to publish (up to ``limit``) to ``publisher``, one at a
    time (writes are serialised per installation anyway); returns how many were offered.
    An attempt that raises is logged and the next run is offered."""
    keys = await pending_keys(store, now, limit)
    for key in keys:
        try:
            await publisher.publish_key(key)
        except Exception:
            log.exception("re-offering a recorded run failed; it stays recorded",
                          extra={"dedupe_key": key})
    if keys:
        log.info("re-offered %d recorded run(s) for publication", len(keys))
    return len(keys)
