"""An installation's cycle at scale (``CyclePlanner`` in the poller): a repository where
search saw a change is polled at the next cycle, the rest are swept a quota a cycle, and
a restart carries on from the store instead of sweeping everything at once."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from service.intake.poller.schedule import sweep_interval, sweep_quota
from service.storage.watermarks import Watermarks, search_key
from tests.poller_rig import PollerRig, sha

NAMES = tuple(f"acme/repo-{i:02d}" for i in range(60))


def _polled(report) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(r.repo for r in report.repositories)


@pytest.mark.anyio
async def test_a_change_is_polled_at_once_and_the_rest_swept_a_quota_a_cycle(
        tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, repos=NAMES)
    try:
        limit = rig.world.limiter.limit_of(f"installation:{rig.installation.id}")
        assert limit == 5000 + 50 * 40
        sweep = sweep_interval(len(NAMES), limit, rig.interval)
        quota = sweep_quota(len(NAMES), sweep, rig.interval)
        assert sweep > rig.interval and quota == 20
        seen: set[str] = set()
        for _ in range(3):  # the first sweep: every repository seeded, a quota a cycle
            report = await rig.poll()
            assert len(report.repositories) == quota
            seen |= set(_polled(report))
            rig.tick(rig.interval.total_seconds())
        assert seen == set(NAMES)
        # A pull request opened where nothing has been polled for three cycles: found by
        # search, polled at the next cycle, reviewed; the sweep goes on beside it.
        rig.open_pull(1, repo="acme/repo-00")
        rig.tick(1)
        report = await rig.poll()
        assert report.hinted == 1 and "acme/repo-00" in _polled(report)
        assert rig.keys() == [f"pr_opened:acme/repo-00:1:{sha(1)}"]
        assert len(report.repositories) <= quota + 1
        assert Watermarks(rig.store).get(search_key(rig.installation.id)) == rig.now()
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_during_the_first_sweep_what_changed_since_the_install_is_decided(
        tmp_path: Path) -> None:
    """Webhooks off, a first sweep of three cycles: a pull request opened and a mention
    written after the App began watching, in repositories not polled yet, are found
    when each is first polled (search hints one; the sweep alone finds the other, search
    failing by then); the backlog from before is not."""
    rig = PollerRig.create(tmp_path, repos=NAMES)
    try:
        rig.open_pull(1, repo="acme/repo-59")  # backlog: before the install was seen
        rig.tick(3600)  # before the first search's window too
        first = await rig.poll()  # records the repositories, seeds the first quota
        polled = set(_polled(first))
        waiting = [n for n in NAMES if n not in polled]
        assert "acme/repo-59" in waiting
        hinted, swept = waiting[0], waiting[-2]
        rig.tick(60)
        rig.open_pull(2, repo=hinted)
        rig.comment(1, "@claude review", repo="acme/repo-59")
        rig.tick(rig.interval.total_seconds())
        report = await rig.poll()
        assert report.hinted == 2 and {hinted, "acme/repo-59"} <= set(_polled(report))
        polled |= set(_polled(report))
        assert swept not in polled
        rig.world.faults.add(method="GET", path_glob="/search/issues", status=503)
        rig.open_pull(3, repo=swept)
        for _ in range(2):
            rig.tick(rig.interval.total_seconds())
            polled |= set(_polled(await rig.poll()))
        assert polled == set(NAMES)
        keys = rig.keys()
        assert keys == sorted([f"pr_opened:{hinted}:2:{sha(2)}",
                               f"pr_opened:{swept}:3:{sha(3)}",
                               *[k for k in keys if k.startswith("mention:acme/repo-59:1:")]])
        assert len(keys) == 3  # the backlog pull request was not taken
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_a_restart_carries_on_from_the_store(tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, repos=NAMES)
    try:
        for cycle in range(3):
            if cycle:
                rig.tick(rig.interval.total_seconds())
            await rig.poll()
        await rig.restart()
        rig.tick(1)
        # The last polls are in the store: nothing is due again before its sweep.
        report = await rig.poll()
        assert report.repositories == []
        # A change made while it was down is found from the stored search position.
        rig.open_pull(2, repo="acme/repo-30")
        rig.tick(rig.interval.total_seconds())
        await rig.restart()
        report = await rig.poll()
        assert report.hinted == 1 and "acme/repo-30" in _polled(report)
        assert rig.keys() == [f"pr_opened:acme/repo-30:2:{sha(2)}"]
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_one_search_a_minute_per_installation(tmp_path: Path) -> None:
    """A poller on a short interval must not spend the search API's 30 a minute and then
    wait out its reset inside a cycle."""
    rig = PollerRig.create(tmp_path, repos=NAMES[:3], interval=timedelta(seconds=1))
    try:
        for _ in range(5):
            await rig.poll()
            rig.tick(1)
        assert len(rig.world.requests.matching("GET", "/search/issues")) == 1
        rig.tick(60)
        await rig.poll()
        assert len(rig.world.requests.matching("GET", "/search/issues")) == 2
    finally:
        await rig.close()
