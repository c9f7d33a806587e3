"""The ``watermarks`` table: how far each poll stream has read, per repository (and the
App's own streams, ``APP_STREAMS``, and each installation's search, ``search_key``).

A watermark only moves forward: ``advance`` keeps the later of the stored and the
offered time, so two pollers racing on one stream cannot move it back.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime
from typing import Final

from service.storage.database import Database, Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = ["APP_STREAMS", "Watermarks", "search_key", "watermark_key"]

logger = logging.getLogger(__name__)

_LEGACY_STREAMS: Final = ("pull_requests", "comments")
_REPO = re.compile(r"[^/\s:]+/[^/\s:]+")
_STREAM = re.compile(r"[A-Za-z0-9_]+")

_GET = "SELECT at FROM watermarks WHERE name = ?"
_PUT = ("INSERT INTO watermarks (name, at) VALUES (?, ?)"
        " ON CONFLICT (name) DO UPDATE SET at = excluded.at")
_DELETE = "DELETE FROM watermarks WHERE name = ?"


def watermark_key(stream: str, repo: str) -> str:
    """The watermark name for ``stream`` on ``repo``: ``watermark_key("comments", "o/r")``
    is ``"comments:o/r"``."""
    if not _STREAM.fullmatch(stream):
        raise ValueError(f"watermark stream {stream!r} must be letters, digits or '_'")
    if not _REPO.fullmatch(repo):
        raise ValueError(f"repository {repo!r} must be 'owner/name'")
    return f"{stream}:{repo}"


#: Streams of the App as a whole, named without a repository: the webhook delivery log's
#: cursor (``service.intake.recovery``).
APP_STREAMS: Final = frozenset({"hook_deliveries"})


_SEARCH = re.compile(r"search:\d+")


def search_key(installation_id: int) -> str:
    """Where an installation's search stands (``service.intake.poller.planner``)."""
    return f"search:{installation_id}"


def _check_name(name: str) -> None:
    if name in APP_STREAMS or _SEARCH.fullmatch(name):
        return
    stream, sep, repo = name.partition(":")
    if not sep or not _STREAM.fullmatch(stream) or not _REPO.fullmatch(repo):
        raise ValueError(
            f"watermark name {name!r} must be '<stream>:<owner>/<name>' (see watermark_key)"
        )


def _get(tx: Transaction, name: str) -> datetime | None:
    row = tx.execute(_GET, (name,)).fetchone()
    return None if row is None else from_db_time(row[0])


def read(tx: Transaction, name: str) -> datetime | None:
    """The watermark ``name`` inside a transaction the caller holds (None: never set)."""
    _check_name(name)
    return _get(tx, name)


class Watermarks:
    """The watermarks held in ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, name: str) -> datetime | None:
        """The watermark stored under ``name`` (``"<stream>:<owner>/<name>"``), or None."""
        with self._db.read() as tx:
            return read(tx, name)

    def advance(self, name: str, at: datetime) -> datetime:
        """Store the later of the stored and the offered time; return the one in force.

        Compared as instants in Python under the write lock rather than as strings in SQL,
        so a row written by older code in another ISO form still compares correctly.
        """
        _check_name(name)
        offered = to_db_time(at)  # rejects a naive datetime before any I/O
        with self._db.transaction() as tx:
            stored = _get(tx, name)
            if stored is not None and stored >= from_db_time(offered):
                return stored
            tx.execute(_PUT, (name, offered))
        return from_db_time(offered)

    def adopt_legacy(self, repo: str) -> bool:
        """Move unqualified ``pull_requests`` / ``comments`` rows onto ``repo``'s keys.

        Once per store: the unqualified rows are deleted in the same transaction, so a
        second repository later pointed at this file inherits nothing. Where a qualified
        row already exists the later time wins. Returns whether any legacy row was found.
        """
        keys = {stream: watermark_key(stream, repo) for stream in _LEGACY_STREAMS}
        adopted: dict[str, str] = {}
        with self._db.transaction() as tx:
            for stream, key in keys.items():
                legacy = _get(tx, stream)
                if legacy is None:
                    continue
                current = _get(tx, key)
                if current is None or current < legacy:
                    tx.execute(_PUT, (key, to_db_time(legacy)))
                tx.execute(_DELETE, (stream,))
                adopted[stream] = to_db_time(legacy)
        if adopted:
            logger.info("adopted legacy watermarks", extra={"repo": repo, "watermarks": adopted})
        return bool(adopted)
