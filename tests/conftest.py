"""Shared fixtures. Keep this small: module-specific fixtures live beside their tests."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.storage import Database, SqliteStore
from tests.databases import BACKENDS, open_database
from tests.simulator.openapi import checker


@pytest.fixture(autouse=True)
def _the_simulator_answers_in_githubs_shapes() -> Iterator[None]:
    """Fail a test during which the GitHub simulator served a response that GitHub's own
    REST description rejects (tests/simulator/openapi): a client that passes against the
    simulator has met GitHub's shapes too."""
    before = len(checker.PROBLEMS)
    yield
    found = checker.PROBLEMS[before:]
    if found:
        shown = "\n".join(found[:20]) + (f"\n… and {len(found) - 20} more" if len(found) > 20
                                          else "")
        pytest.fail("the simulator served shapes GitHub's description rejects:\n" + shown,
                    pytrace=False)


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A fresh store on each backend in turn: the SQLite file, then PostgreSQL."""
    with open_database(request.param, tmp_path) as db:
        yield db


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SqliteStore]:
    """The SQLite file alone, for what only it has (its query plans, its pragmas)."""
    with SqliteStore(tmp_path / "state.db") as store:
        yield store
