"""Re-offering recorded runs that were never published: oldest first, a bounded batch, and
one attempt that raises neither stops the others nor loses its run — on both backends."""

from __future__ import annotations

import logging

import pytest

from service.publish.retry import pending_keys, republish_pending
from tests.publisher_rig import Rig, publisher_rig

__all__ = ["publisher_rig"]


class Offered:
    """A publisher that records what it was offered, and fails for ``failing``."""

    def __init__(self, failing: str = "") -> None:
        self.keys: list[str] = []
        self.failing = failing

    async def publish_key(self, key: str) -> object:
        self.keys.append(key)
        if key == self.failing:
            raise RuntimeError("GitHub said 502 three times")
        return None


@pytest.mark.anyio
async def test_recorded_runs_are_offered_oldest_first_in_batches(rig: Rig) -> None:
    keys = []
    for _ in range(3):
        keys.append(rig.record(rig.opened(rig.add_pull())).dedupe_key)
        rig.advance(seconds=1)
    assert await pending_keys(rig.store, rig.now()) == keys
    assert await pending_keys(rig.store, rig.now(), limit=2) == keys[:2]
    offered = Offered()
    assert await republish_pending(rig.store, offered, rig.now(), limit=2) == 2
    assert offered.keys == keys[:2]


@pytest.mark.anyio
async def test_a_failed_attempt_is_logged_and_the_next_run_still_offered(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    first = rig.record(rig.opened(rig.add_pull())).dedupe_key
    rig.advance(seconds=1)
    second = rig.record(rig.opened(rig.add_pull())).dedupe_key
    offered = Offered(failing=first)
    with caplog.at_level(logging.ERROR, logger="service.publish.retry"):
        assert await republish_pending(rig.store, offered, rig.now()) == 2
    assert offered.keys == [first, second]
    [failed] = caplog.records
    assert failed.dedupe_key == first  # type: ignore[attr-defined]
    # Nothing was published: both stay to be offered again.
    assert await pending_keys(rig.store, rig.now()) == [first, second]


@pytest.mark.anyio
async def test_a_published_run_is_not_offered_again(rig: Rig) -> None:
    run = rig.record(rig.opened(rig.add_pull()))
    await rig.publisher().publish_key(run.dedupe_key)
    assert await pending_keys(rig.store, rig.now()) == []
    assert await republish_pending(rig.store, Offered(), rig.now()) == 0
