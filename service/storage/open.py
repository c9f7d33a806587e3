"""Opening the store a config names: the SQLite file (``store.path``) or PostgreSQL
(``store.url``). The composition root and the commands call this; nothing else picks a
backend."""

from __future__ import annotations

from service.config.connections import StoreConfig
from service.storage.database import Database

__all__ = ["open_store", "store_label"]


def open_store(config: StoreConfig, *, role: str | None = None) -> Database:
    """Connect to (and migrate) the store ``config`` names; ``role`` (serve's) is part of
    the name the connections show the database server (``application_name``)."""
    if config.url is not None:
        from service.storage.pg_leadership import application_name
        from service.storage.postgres import PostgresStore

        password = None if config.password is None else config.password.reveal()
        return PostgresStore(config.url, password=password,
                             name=application_name(role))
    from service.storage.sqlite import SqliteStore

    return SqliteStore(config.path)


def store_label(config: StoreConfig) -> str:
    """What to call the store in a message: its path, or its URL (which holds no password)."""
    return config.url if config.url is not None else config.path
