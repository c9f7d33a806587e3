"""``open_store``: the backend a config's store section names, and how a message names it."""

from __future__ import annotations

from pathlib import Path

from service.config.connections import StoreConfig
from service.storage.open import open_store, store_label
from service.storage.postgres import PostgresStore
from service.storage.sqlite import SqliteStore
from tests.databases import as_url, throwaway_database


def test_a_path_opens_the_sqlite_file(tmp_path: Path) -> None:
    config = StoreConfig(path=str(tmp_path / "state.db"))
    with open_store(config) as store:
        assert isinstance(store, SqliteStore)
    assert store_label(config) == str(tmp_path / "state.db")


def test_a_url_opens_postgresql_and_is_its_label() -> None:
    with throwaway_database(migrated=True) as conninfo:
        url, _ = as_url(conninfo)
        config = StoreConfig(url=url)
        with open_store(config) as store:
            assert isinstance(store, PostgresStore)
        assert store_label(config) == url
