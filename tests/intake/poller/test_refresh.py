"""Which repositories the poller polls (refresh.py): listed again on request, every N
cycles, and a pre-upgrade store's watermarks adopted for the one configured repository."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from service.storage.times import to_db_time
from tests.poller_rig import (
    GADGETS,
    REPO,
    PollerRig,
    legacy_marks,
    poller_rig,  # noqa: F401 - the `rig` fixture
    repositories_table,
    requests_to,
    sha,
)


@pytest.mark.anyio
async def test_a_refresh_on_request_polls_added_repositories_and_records_removals(
        rig: PollerRig) -> None:
    await rig.poll()
    gadgets = rig.world.add_repository(GADGETS)
    rig.installation.repository_ids.add(gadgets.id)
    rig.tick()
    await rig.poll()
    assert requests_to(rig, GADGETS) == 0  # not refreshed yet
    rig.poller.request_refresh()
    rig.tick()
    report = await rig.poll()
    assert report.refreshed
    assert requests_to(rig, GADGETS) > 0
    assert rig.watermark("pull_requests", GADGETS) is not None
    inst = rig.installation.id
    assert repositories_table(rig) == {REPO: (inst, None), GADGETS: (inst, None)}
    rig.installation.repository_ids.discard(rig.world.repo(REPO).id)
    await anyio.to_thread.run_sync(rig.poller.request_refresh)  # from another thread
    rig.tick()
    before = requests_to(rig, REPO)
    await rig.poll()
    assert requests_to(rig, REPO) == before
    table = repositories_table(rig)
    assert table[REPO] == (inst, to_db_time(rig.now()))
    assert table[GADGETS] == (inst, None)


@pytest.mark.anyio
async def test_targets_are_refreshed_every_n_cycles(tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, refresh_every=3)
    try:
        await rig.poll()
        gadgets = rig.world.add_repository(GADGETS)
        rig.installation.repository_ids.add(gadgets.id)
        refreshed = []
        for _ in range(4):
            rig.tick(300)
            refreshed.append((await rig.poll()).refreshed)
        assert refreshed == [False, False, True, False]
        assert GADGETS in [t.repo for t in rig.poller.targets]
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_legacy_watermarks_are_adopted_for_the_one_configured_repository(
        tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, allowlist=(REPO,))
    try:
        rig.open_pull(1)  # polled by the old daemon before the upgrade
        legacy_marks(rig.store, to_db_time(rig.now()))
        rig.tick()
        rig.open_pull(2)  # after the old daemon's last poll: still owed a review
        rig.tick()
        report = await rig.poll()
        assert report.repositories[0].seeded == []
        assert rig.keys() == [f"pr_opened:{REPO}:2:{sha(2)}"]
        with rig.store.read() as conn:
            names = sorted(n for (n,) in conn.execute("SELECT name FROM watermarks")
                           if not n.startswith("search:"))  # the installation's search
        # The adopted marks, and the one the poller has since moved past recorded as
        # inherited (``seed_*``: its items were decided by the daemon before).
        assert names == [f"comments:{REPO}", f"pull_requests:{REPO}",
                         f"seed_pull_requests:{REPO}"]
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_legacy_watermarks_are_not_guessed_onto_one_of_several_repositories(
        tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, repos=(REPO, GADGETS), allowlist=(REPO, GADGETS))
    try:
        rig.open_pull(1)
        legacy_marks(rig.store, to_db_time(rig.now()))
        rig.tick()
        rig.open_pull(2)
        rig.tick()
        report = await rig.poll()
        assert sorted(report.repositories[0].seeded) == ["comments", "pull_requests"]
        assert rig.rows() == []
    finally:
        await rig.close()
