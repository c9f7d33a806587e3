"""The poll loop: contention, store faults, GitHub failures, pacing, refreshes, legacy marks."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import anyio
import pytest

from service.intake.poller import schedule
from service.storage import repository_polls
from service.storage.sqlite import SqliteStore
from tests.poller_rig import (
    GADGETS,
    REPO,
    T0,
    PollerRig,
    poller_rig,  # noqa: F401 - the `rig` fixture
    repositories_table,
    requests_to,
    sha,
)

# -- reporting ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_cycle_reports_to_on_cycle(rig: PollerRig) -> None:
    report = await rig.poll()
    assert report.refreshed
    assert rig.cycles == [(True, T0)]
    assert report.next_at == T0 + timedelta(seconds=300)
    assert [t.repo for t in rig.poller.targets] == [REPO]


@pytest.mark.anyio
async def test_a_failing_health_callback_does_not_stop_polling(tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path)
    try:
        def broken(ok: bool, at: object) -> None:
            raise RuntimeError("health is down")

        rig.poller._on_cycle = broken
        report = await rig.poll()
        assert report.success
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_poll_once_refuses_a_naive_time(rig: PollerRig) -> None:
    with pytest.raises(ValueError, match="naive"):
        await rig.poller.poll_once(T0.replace(tzinfo=None))


# -- store contention and store faults --------------------------------------------------------


@pytest.mark.anyio
async def test_contention_skips_the_cycle_and_the_loop_continues(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rig = PollerRig.create(tmp_path, store=SqliteStore(path, busy_timeout=0.05))
    try:
        rig.open_pull(1)
        rig.tick()
        await rig.poll()
        rig.tick()
        rig.open_pull(2)
        rig.tick()
        # Another process holds the write lock for the whole of the next cycle.
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")

        async def release(seconds: float) -> None:
            if other.in_transaction:
                other.execute("COMMIT")

        rig.sleep.hook = release
        try:
            await rig.poller.run(cycles=2)
        finally:
            other.close()
        assert [ok for ok, _ in rig.cycles] == [True, False, True]
        assert rig.keys() == [f"pr_opened:{REPO}:2:{sha(2)}"]
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_any_other_store_error_ends_the_loop_loudly(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    rig = PollerRig.create(tmp_path)
    try:
        rig.open_pull(1)
        rig.tick()
        await rig.poll()
        rig.tick()
        rig.open_pull(2)
        rig.tick()
        conn = sqlite3.connect(path, isolation_level=None)
        try:  # a store that lost a table is not one to trust
            conn.execute("DROP TABLE closed_pull_requests")
        finally:
            conn.close()
        with pytest.raises(sqlite3.OperationalError, match="no such table"):
            await rig.poller.run(cycles=3)
        assert rig.cycles[-1][0] is False
        assert len(rig.cycles) == 2
    finally:
        await rig.close()


# -- GitHub failures ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_failing_repository_does_not_stop_the_others(tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, repos=(REPO, GADGETS))
    try:
        rig.world.faults.add(method="GET", path_glob=f"/repos/{GADGETS}/*", status=502,
                             times=None)
        await rig.poller.run(cycles=2)
        assert [ok for ok, _ in rig.cycles] == [False, False]
        assert rig.watermark("pull_requests") is not None
        assert rig.watermark("pull_requests", GADGETS) is None
        with rig.store.read() as tx:  # the status page's freshness per repository
            polls = {p.repo: p for p in repository_polls.latest(tx)}
        assert polls[REPO].error is None and polls[REPO].succeeded_at == polls[REPO].polled_at
        assert polls[GADGETS].succeeded_at is None and "502" in (polls[GADGETS].error or "")
        rig.world.faults.clear()
        rig.tick()
        report = await rig.poll()
        assert report.success
        assert rig.watermark("pull_requests", GADGETS) is not None
        with rig.store.read() as tx:
            healed = {p.repo: p for p in repository_polls.latest(tx)}[GADGETS]
        assert (healed.error, healed.succeeded_at, healed.polled_at) == (None, rig.now(),
                                                                          rig.now())
    finally:
        await rig.close()


# -- pacing -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_low_rate_limit_stretches_the_wait_until_the_reset(rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.tick()
    await rig.poll()
    bucket = f"installation:{rig.installation.id}"
    rig.tick()
    reset_at = rig.world.limiter.set_remaining(bucket, 10, rig.now().timestamp()).reset_at
    expected_wait = reset_at - rig.now().timestamp()
    assert expected_wait > 300
    before = len(rig.repo_requests())
    await rig.poller.run(cycles=2)
    # The first cycle saw 10 requests left, under the 1,000 reserve: wait for the reset.
    assert rig.sleep.waits == [pytest.approx(expected_wait)]
    # After the reset the second cycle polls again.
    assert rig.cycles[-1] == (True, rig.now())
    assert len(rig.repo_requests()) > before + 3


@pytest.mark.anyio
async def test_an_installation_already_short_of_budget_is_not_polled(rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.tick()
    await rig.poll()
    bucket = f"installation:{rig.installation.id}"
    rig.world.limiter.set_remaining(bucket, 500, rig.now().timestamp())
    rig.tick()
    await rig.poll()  # this cycle learns the reading
    reading = rig.rate_limit()
    assert reading is not None
    assert reading.remaining == 500
    before = len(rig.repo_requests())
    rig.tick(300)
    report = await rig.poll()
    assert report.held == {rig.installation.id: reading.reset}
    assert len(rig.repo_requests()) == before
    assert report.next_at == reading.reset


@pytest.mark.anyio
async def test_a_cold_starts_one_time_seeding_is_not_taken_for_the_cost_of_a_cycle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A share of the limit that pays for polling every repository every cycle, so that
    # this cycle polls them all (``schedule``): the pacing is what is pinned here.
    monkeypatch.setattr(schedule, "POLL_SHARE", 1.0)
    names = [f"acme/repo-{i:02d}" for i in range(20)]
    rig = PollerRig.create(tmp_path, repos=names, rate_limit=1000)
    try:
        report = await rig.poll()
        assert report.tally.requests == 100
        assert report.tally.seeding == 60  # 20 x (pull requests + two comment seeds)
        # 899 left, 200 reserved: at 40 a cycle that is still the plain interval. Had the
        # seeding counted, 101 a cycle would have stretched it to ten minutes.
        assert report.held == {}
        assert report.next_at == T0 + timedelta(seconds=300)
    finally:
        await rig.close()


# -- installations and repositories -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_refresh_request_wakes_a_sleeping_loop(rig: PollerRig) -> None:
    async def sleep_forever(seconds: float) -> None:
        await anyio.sleep_forever()

    rig.sleep.hook = sleep_forever
    gadgets = rig.world.add_repository(GADGETS)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(rig.poller.run, cycles=2))
            while not rig.cycles:
                await anyio.sleep(0.01)
            rig.installation.repository_ids.add(gadgets.id)
            rig.poller.request_refresh()
    assert len(rig.cycles) == 2
    assert rig.sleep.waits == [300.0]
    assert GADGETS in [t.repo for t in rig.poller.targets]


@pytest.mark.anyio
async def test_only_configured_repositories_are_polled_under_githubs_spelling(
        tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, repos=("Acme/Widgets", GADGETS),
                           allowlist=("acme/WIDGETS",))
    try:
        await rig.poll()
        assert [t.repo for t in rig.poller.targets] == ["Acme/Widgets"]
        assert requests_to(rig, GADGETS) == 0
        rig.tick()
        rig.open_pull(1, repo="Acme/Widgets")
        rig.tick()
        await rig.poll()
        assert rig.keys() == [f"pr_opened:Acme/Widgets:1:{sha(1)}"]
        # Everything installed is recorded, polled or not.
        assert set(repositories_table(rig)) == {"Acme/Widgets", GADGETS}
    finally:
        await rig.close()


# -- legacy watermarks -----------------------------------------------------------------------


class Turns:
    """A leadership that another process holds for ``standby`` asks, then this one wins."""

    def __init__(self, standby: int) -> None:
        self.left = standby
        self.closed = False

    def lead(self) -> bool:
        self.left -= 1
        return self.left < 0

    def close(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_a_standby_poller_polls_nothing_until_it_leads(rig: PollerRig) -> None:
    standing_by: list[datetime] = []
    poller = rig.new_poller(leadership=Turns(standby=2), on_standby=standing_by.append)
    await poller.run(cycles=1)
    # Two intervals of standing by (asked again at each), then the one real cycle.
    assert len(standing_by) == 2 and len(rig.cycles) == 1
    assert rig.sleep.waits[:2] == [rig.interval.total_seconds()] * 2
    listings = list(rig.world.requests.matching("GET", "/app/installations*"))
    assert len(listings) == 1  # GitHub heard from it only once it led
