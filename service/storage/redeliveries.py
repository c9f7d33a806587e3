"""The ``hook_redeliveries`` table: the webhook deliveries the delivery log's reader asked
GitHub to send again (``service.intake.recovery``), by guid.

A row says "asked at ``requested_at`` for log entry ``delivery_id``". While it stands, the
reader waits for GitHub's attempt; when that attempt fails, or none comes within the
reader's patience, the reader fetches the delivery from the log instead. A row goes once
the delivery is in (``done``), and rows older than GitHub's window are pruned with the
delivery ids (``prune``). Rows are written in the store every process shares, so a reader
that takes over leadership mid-way picks up where the last one was.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from service.storage.database import Transaction
from service.storage.deliveries import MEMORY
from service.storage.times import from_db_time, to_db_time

__all__ = ["Requested", "done", "pending", "prune", "requested"]

_INSERT: Final = ("INSERT INTO hook_redeliveries (guid, delivery_id, requested_at)"
                  " VALUES (?, ?, ?) ON CONFLICT (guid) DO NOTHING")
_PENDING: Final = "SELECT guid, delivery_id, requested_at FROM hook_redeliveries"
_DONE: Final = "DELETE FROM hook_redeliveries WHERE guid IN ({})"
_PRUNE: Final = "DELETE FROM hook_redeliveries WHERE requested_at < ?"


@dataclass(frozen=True)
class Requested:
    """A redelivery asked for: of which log entry, and when."""

    delivery_id: int
    at: datetime


def requested(tx: Transaction, guid: str, delivery_id: int, now: datetime) -> None:
    """Record that ``guid`` was asked for again (a second ask keeps the first's time)."""
    tx.execute(_INSERT, (guid, delivery_id, to_db_time(now)))


def pending(tx: Transaction) -> dict[str, Requested]:
    """Every redelivery asked for and not yet in, by guid."""
    return {str(guid): Requested(int(delivery_id), from_db_time(at))
            for guid, delivery_id, at in tx.execute(_PENDING)}


def done(tx: Transaction, guids: Iterable[str]) -> None:
    """Forget ``guids``: their deliveries are in (or GitHub says they went through)."""
    wanted = list(guids)
    if wanted:
        tx.execute(_DONE.format(", ".join("?" * len(wanted))), wanted)


def prune(tx: Transaction, *, now: datetime) -> int:
    """Forget what was asked for longer ago than a delivery id is remembered."""
    return int(tx.execute(_PRUNE, (to_db_time(now - MEMORY),)).rowcount)
