"""Where a stream stands between polls (marks.py): an unfinished fetch is fetched in full,
a mark moves forward only, a cold start's mark is recorded as its seed, and what a
process knows at the mark's second (the boundary) is forgotten by a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.intake.poller.marks import StreamMarks, seed_key
from service.intake.poller.streams import Boundary
from service.storage.database import Database
from service.storage.watermarks import watermark_key

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
KEY = watermark_key("comments", "o/r")
SEED = seed_key("comments", "o/r")


@pytest.fixture
def store(database: Database) -> Database:
    return database  # each test runs on SQLite and on PostgreSQL


def test_a_fetch_that_never_finished_is_forced_next_time(store: Database) -> None:
    marks = StreamMarks(store)
    assert marks.begin(KEY) is False
    assert marks.begin(KEY) is True  # the first never finished
    marks.finish(KEY)
    assert marks.begin(KEY) is False


@pytest.mark.anyio
async def test_a_mark_moves_forward_only_and_records_the_seed_it_inherited(
        store: Database) -> None:
    marks = StreamMarks(store)
    assert await marks.watermark(KEY) is None
    assert await marks.advance(KEY, T0) == T0
    assert await marks.move(KEY, SEED, T0, T0 - timedelta(minutes=1)) == T0  # not back
    assert await marks.watermark(SEED) is None
    assert await marks.move(KEY, SEED, T0, T0 + timedelta(minutes=1)) == T0 + timedelta(
        minutes=1)
    assert await marks.watermark(SEED) == T0  # the inherited mark, remembered as the seed


@pytest.mark.anyio
async def test_the_boundary_is_known_in_memory_and_empty_after_a_restart(
        store: Database) -> None:
    marks = StreamMarks(store)
    await marks.advance(SEED, T0)
    # At a cold start's own mark nothing is known: its items predate the install.
    assert await marks.boundary(KEY, SEED, T0) is None
    later = T0 + timedelta(minutes=5)
    marks.set_seed_boundary(KEY, later, [("a", later), ("b", T0)], complete=True)
    assert await marks.boundary(KEY, SEED, later) == Boundary(later, frozenset({"a"}))
    marks.set_seed_boundary(KEY, later, [("a", later)], complete=False)
    restarted = StreamMarks(store)
    # A regular poll's mark: an empty boundary, so its second is replayed (idempotently).
    assert await restarted.boundary(KEY, SEED, later) == Boundary(later)
