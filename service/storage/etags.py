"""The ``etags`` table: the durable ``ETagCache`` the GitHub client's conditional GETs use.

A lost entry costs one full GET, never correctness (see ``service.model.etags``); keeping them
in the store is what lets a restarted poller's first cycle be answered with 304s.
"""

from __future__ import annotations

from service.model.etags import Validators, resource_of
from service.storage.database import Database

__all__ = ["StoredETags"]

_GET = "SELECT etag, last_modified FROM etags WHERE path = ?"
# '$' follows '#': every key that starts with "<resource>#", except the one being stored.
_DROP_VARIANTS = "DELETE FROM etags WHERE path >= ? AND path < ? AND path != ?"
_PUT = ("INSERT INTO etags (path, etag, last_modified) VALUES (?, ?, ?)"
        " ON CONFLICT (path) DO UPDATE"
        " SET etag = excluded.etag, last_modified = excluded.last_modified")


class StoredETags:
    """The ``ETagCache`` held in ``db``."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get_validators(self, key: str) -> Validators | None:
        """The validators last stored for ``key``, or None."""
        with self._db.read() as tx:
            row = tx.execute(_GET, (key,)).fetchone()
        return None if row is None else Validators(etag=row[0], last_modified=row[1])

    def put_validators(self, key: str, validators: Validators) -> None:
        """Store (or replace) the validators for ``key``, dropping its other variants.

        Variants are keys for the same resource with another suffix after the last ``#``
        (another token's fingerprint; see ``service.model.etags``).
        """
        resource = resource_of(key)
        with self._db.transaction() as tx:
            if resource != key:
                tx.execute(_DROP_VARIANTS, (resource + "#", resource + "$", key))
            tx.execute(_PUT, (key, validators.etag, validators.last_modified))
