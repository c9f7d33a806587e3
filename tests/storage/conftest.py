"""Fixtures of the storage tests that make their own PostgreSQL connections and stores."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from service.storage.postgres import PostgresStore
from tests.databases import throwaway_database


@pytest.fixture
def conninfo() -> Iterator[str]:
    """A throwaway database of its own (dropped after the test): for tests that make
    their own connections and stores."""
    with throwaway_database() as info:
        yield info


@pytest.fixture
def pg(conninfo: str) -> Iterator[PostgresStore]:
    """A store on ``conninfo`` that waits at most half a second for a lock."""
    with PostgresStore(conninfo, lock_timeout=0.5) as store:
        yield store
