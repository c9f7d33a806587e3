"""Shared fixtures. Keep this small: module-specific fixtures live beside their tests."""

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from service.storage.database import Database
from service.storage.sqlite import SqliteStore
from tests.databases import BACKENDS, open_database
from tests.kit.thorough import THOROUGH, examples
from tests.simulator.openapi import checker

# A property without its own ``max_examples`` tries Hypothesis's 100 under CI, a quarter on
# a developer's machine (tests/kit/thorough.py); one with its own scales the same way.
settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=examples(100))
settings.load_profile("ci" if THOROUGH else "dev")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Spread the ``slow`` tests (about a minute each: chaos with real processes) evenly
    through the run. pytest-xdist hands each worker one contiguous block of the
    collection; left together (tests/chaos/ sorts first) they would all queue on one
    worker, and the run would last as long as their sum. Each goes in between two
    modules, never inside one, so a module's own fixtures are still set up once."""
    slow = [item for item in items if item.get_closest_marker("slow")]
    rest = [item for item in items if not item.get_closest_marker("slow")]
    if not slow or not rest:
        return
    boundaries = [0] + [i for i in range(1, len(rest))
                        if rest[i].module is not rest[i - 1].module] + [len(rest)]
    step = len(rest) / len(slow)
    before: dict[int, list[pytest.Item]] = {}
    for index, item in enumerate(slow):
        nearest = min(boundaries, key=lambda b: abs(b - index * step))
        before.setdefault(nearest, []).append(item)
    items[:] = [moved for position in range(len(rest) + 1)
                for moved in (*before.get(position, ()),
                              *(rest[position:position + 1]))]


@pytest.fixture
def anyio_backend() -> str:
    """The async tests run on asyncio (what uvicorn and the service run on)."""
    return "asyncio"


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
