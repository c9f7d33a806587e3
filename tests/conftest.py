"""Shared fixtures. Keep this small: module-specific fixtures live beside their tests."""

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from service.storage.database import Database
from service.storage.sqlite import SqliteStore
from tests.kit.stores import BACKENDS, new_sqlite_store, open_database
from tests.kit.thorough import THOROUGH, examples
from tests.simulator.openapi import checker

# The suite starts hundreds of Python processes (serve, the simulator, the fake engines,
# the CLI) and one per xdist worker, each importing the service and test modules: with
# PYTHONDONTWRITEBYTECODE set (some images set it) every one of them compiles them all
# from source again, and pytest rewrites every test module's asserts in every worker. So
# the tests write bytecode caches (into the checkout's ignored __pycache__ directories)
# whatever the environment says; this process and everything it starts.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def _warm_caches(config: pytest.Config) -> None:
    """On a checkout whose caches are cold (a fresh clone: CI), compile once, in one
    collection, before the xdist workers start: each of them would otherwise compile every
    module and rewrite every test module itself, all at once, about 4 CPU-seconds each."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None):
        return
    root = Path(__file__).resolve().parent.parent
    probe = root / "service" / "app" / "daemon.py"
    if Path(importlib.util.cache_from_source(str(probe))).exists():
        return
    subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0",
         "-p", "no:cacheprovider", str(root / "tests")],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def pytest_configure(config: pytest.Config) -> None:
    _warm_caches(config)


# A property without its own ``max_examples`` tries Hypothesis's 100 under CI, a quarter on
# a developer's machine (tests/kit/thorough.py); one with its own scales the same way.
settings.register_profile("ci", max_examples=100)
settings.register_profile("dev", max_examples=examples(100))
settings.load_profile("ci" if THOROUGH else "dev")


def _seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.args[0]) if marker is not None and marker.args else 0.0


def _marked_whole(item: pytest.Item) -> bool:
    marks = getattr(getattr(item, "module", None), "pytestmark", [])
    marks = marks if isinstance(marks, list) else [marks]
    return any(mark.name == "slow" for mark in marks)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Start the ``slow`` tests first, each module of them on a worker of its own where it
    can.

    pytest-xdist's work-stealing scheduler first hands each of its N workers one
    contiguous, equal block of the collection, and an idle worker later steals from the
    *end* of another's queue. A test of a minute or more therefore belongs at the *start*
    of a block: placed anywhere else it may begin when the others are nearly done, and the
    run lasts as long as its tail. So the blocks are laid out here exactly as the
    scheduler will cut them (``PYTEST_XDIST_WORKER_COUNT``, which xdist sets in each
    worker), and the slow tests go to the front of the blocks, longest first
    (``slow(seconds)``), each to the block with the least slow time so far. A module marked
    slow as a whole (``pytestmark``: its tests share one module-scoped run) stays together,
    so that its fixture is set up once; the other tests keep their order."""
    groups: dict[object, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            groups.setdefault(item.module if _marked_whole(item) else item, []).append(item)
    if not groups:
        return
    rest = [item for item in items if not item.get_closest_marker("slow")]
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    fronts: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for group in sorted(groups.values(), key=lambda g: sum(map(_seconds, g)), reverse=True):
        min(fronts, key=lambda front: sum(map(_seconds, front))).extend(group)
    # The scheduler's cut: worker i of n takes len(pending) // (n - i) of what is left.
    sizes, left = [], len(items)
    for index in range(workers):
        sizes.append(left // (workers - index))
        left -= sizes[-1]
    ordered: list[pytest.Item] = []
    for front, size in zip(fronts, sizes, strict=True):
        take = max(0, size - len(front))
        ordered += front + rest[:take]
        rest = rest[take:]
    items[:] = ordered + rest


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
    with new_sqlite_store(tmp_path / "state.db") as store:
        yield store
