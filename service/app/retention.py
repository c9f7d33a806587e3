"""Retention: once a pull request has closed or merged, its review content is purged.

``runs`` is the only table holding review content (findings, the assessment, the withheld
paths, a description, a question and its answer). When a pull request closes — either
ingest path records it in ``closed_pull_requests`` — and ``retention.delay_hours`` have
passed, ``sweep`` empties
that content from every run of the pull request and stamps ``content_purged_at``:

- ``findings`` → ``'[]'`` and ``omitted`` → ``'[]'``;
- ``assessment`` → NULL;
- ``description`` and ``answer`` → ``'{}'`` where there was one (NULL stays NULL, so a
  purged description or answer is still told apart from a review);
- ``content_purged_at`` → the sweep's ``now``, so a purged run stays distinguishable from
  one that found nothing.

What stays: the run's identity, head, outcome and publication record (``comment_id``,
``published_at``, ``publish_outcome``…), ``agent_comments``, and the ledger, untouched — the
budget windows are sums over the ledger, and deleting or changing a row would hand back
allowance that was really spent. Purge content, keep metrics.

Which runs belong to the closed pull request: those recorded by the close, or reserved
(started) by it. A run that started before the close and finished after it is purged at the
next sweep; a run of the same pull request after it was *reopened* started after the close
and is kept (a later close records a new ``closed_at`` and purges it then). A run not yet
published when it is purged is never published: the publisher does not post purged runs.

Webhook delivery ids are forgotten too, once GitHub can no longer redeliver them
(``forget_deliveries``, ``service.storage.deliveries.MEMORY``).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from service.config.schema import RetentionConfig
from service.storage import closures, deliveries, redeliveries, runs
from service.storage.database import Database

log = logging.getLogger(__name__)

def delay_of(config: RetentionConfig) -> timedelta | None:
    """The configured delay after a close, or None when purging is off."""
    if not config.purge_after_close:
        return None
    return timedelta(hours=config.delay_hours)


def sweep(store: Database, now: datetime, delay: timedelta) -> int:
    """Purge the content of every run of a pull request closed at least ``delay`` before
    ``now``; returns how many runs were purged. One transaction; idempotent."""
    if delay < timedelta(0):
        raise ValueError("the retention delay cannot be negative")
    cutoff = now - delay
    with store.transaction() as tx:
        purged = runs.purge_closed(tx, now=now, cutoff=cutoff)
        closed = closures.stamp_purged(tx, now=now, cutoff=cutoff)
    if purged or closed:
        log.info("retention: purged the content of %d run(s) of %d closed pull request(s)",
                 purged, closed, extra={"runs": purged, "pull_requests": closed})
    return purged


#: Batches of delivery ids pruned per maintenance round (``PRUNE_BATCH`` each): a backlog,
#: such as an upgrade onto a table that was never pruned, drains over a few rounds.
PRUNE_BATCHES = 20


def forget_deliveries(store: Database, now: datetime, *,
                      batch: int = deliveries.PRUNE_BATCH, batches: int = PRUNE_BATCHES) -> int:
    """Prune the delivery ids older than ``deliveries.MEMORY``, one short transaction per
    ``batch`` so that webhook ingest waits for the write lock at most one batch long, and at
    most ``batches`` of them; how many went."""
    total = 0
    for _ in range(batches):
        with store.transaction() as tx:
            gone = deliveries.prune(tx, now=now, limit=batch)
        total += gone
        if gone < batch:
            break
    with store.transaction() as tx:  # the redeliveries asked for as long ago: a handful
        redeliveries.prune(tx, now=now)
    return total
