"""The ``deliveries`` table: every webhook delivery recorded, keyed by X-GitHub-Delivery.

A redelivery (GitHub's, or an operator's "Redeliver") carries the same id and is
answered as a duplicate; the row is written in the transaction that carries out what the
delivery asked, so a crash leaves neither.

An id only has to be remembered while GitHub can deliver it again: GitHub lets a delivery
be redelivered for 3 days. ``MEMORY`` keeps it 7 (4 days of margin, for a redelivery
queued late, a host whose clock is off, an operator's replay of a saved payload); the
maintenance loop prunes older rows a batch at a time (``prune``), so the table stops
growing at about a week of deliveries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from service.storage.database import Transaction
from service.storage.times import to_db_time

__all__ = ["MEMORY", "PRUNE_BATCH", "DeliveryRow", "prune", "record", "seen"]

#: How long a delivery id is remembered: GitHub's 3-day redelivery window, and 4 days more.
MEMORY: Final = timedelta(days=7)
#: Rows deleted per transaction: short enough not to hold the write lock against ingest.
PRUNE_BATCH: Final = 5000

_SEEN = "SELECT delivery_id FROM deliveries WHERE delivery_id IN ({})"
_RECORD = ("INSERT INTO deliveries"
           " (delivery_id, event, action, installation_id, received_at, outcome) VALUES ")
_ROW = "(?, ?, ?, ?, ?, ?)"
_PRUNE = ("DELETE FROM deliveries WHERE delivery_id IN (SELECT delivery_id FROM deliveries"
          " WHERE received_at < ? ORDER BY received_at LIMIT ?)")


@dataclass(frozen=True)
class DeliveryRow:
    """One delivery as recorded."""

    delivery_id: str
    event: str
    action: str | None
    installation_id: int | None
    received_at: datetime
    outcome: str


def seen(tx: Transaction, ids: Sequence[str]) -> set[str]:
    """Which of ``ids`` are recorded already (one statement for the lot)."""
    if not ids:
        return set()
    return {str(row[0]) for row in tx.execute(_SEEN.format(", ".join("?" * len(ids))), ids)}


def record(tx: Transaction, rows: Sequence[DeliveryRow]) -> None:
    """Record ``rows`` (one multi-row INSERT); a recorded id again is an integrity error."""
    if not rows:
        return
    values: list[object] = []
    for row in rows:
        values += (row.delivery_id, row.event, row.action, row.installation_id,
                   to_db_time(row.received_at), row.outcome)
    tx.execute(_RECORD + ", ".join([_ROW] * len(rows)), values)


def prune(tx: Transaction, *, now: datetime, limit: int = PRUNE_BATCH) -> int:
    """Forget up to ``limit`` of the oldest deliveries received more than ``MEMORY`` before
    ``now``; how many went (fewer than ``limit``: none older remain)."""
    return int(tx.execute(_PRUNE, (to_db_time(now - MEMORY), limit)).rowcount)
