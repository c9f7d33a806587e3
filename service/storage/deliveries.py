"""The ``deliveries`` table: every webhook delivery recorded, keyed by X-GitHub-Delivery.

A redelivery (GitHub's, or an operator's "Redeliver") carries the same id and is
answered as a duplicate; the row is written in the transaction that carries out what the
delivery asked, so a crash leaves neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from service.storage.database import Transaction
from service.storage.times import to_db_time

__all__ = ["DeliveryRow", "record", "seen"]

_SEEN = "SELECT delivery_id FROM deliveries WHERE delivery_id IN ({})"
_RECORD = ("INSERT INTO deliveries"
           " (delivery_id, event, action, installation_id, received_at, outcome) VALUES ")
_ROW = "(?, ?, ?, ?, ?, ?)"


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
