"""Pushing what a check run should show to GitHub: a create whose answer was lost found by
its external id and never made twice, a row another process pushed meanwhile not created
again, an installation without checks: write told apart and left alone — on both
backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.observe.health import DEGRADED, OK, Health
from service.storage import checks
from tests.publisher_rig import (
    ANCHORED,
    OWNER,
    Rig,
    publisher_rig,
)

__all__ = ["publisher_rig"]

pytestmark = pytest.mark.anyio

def check_rows(rig: Rig, key: str) -> list[checks.CheckRow]:
    with rig.store.read() as tx:
        return checks.rows(tx, key)



async def test_a_lost_create_answer_is_found_by_its_external_id_and_never_made_twice(
        rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.opened(pr)
    rig.queue.enqueue(job, now=rig.now())
    # GitHub creates the check run, and its answer is lost on the way back.
    rig.world.faults.server_error(method="POST", path_glob="/repos/*/check-runs",
                                  applied=True)
    loop = rig.check_runs()
    assert await loop.sync(rig.now()) == 0
    assert len(rig.github_check_runs()) == 1
    (row,) = check_rows(rig, job.dedupe_key)
    assert row.check_run_id is None and row.create_started_at is not None

    assert await rig.check_runs().sync(rig.now()) == 1  # a restarted loop, too
    (run,) = rig.github_check_runs()
    (row,) = check_rows(rig, job.dedupe_key)
    assert row.check_run_id == run.id and row.shown_version == row.version


async def test_a_row_another_process_pushed_since_it_was_read_is_not_created_again(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    pr = rig.add_pull()
    rig.queue.enqueue(rig.opened(pr), now=rig.now())
    first, second = rig.check_runs(), rig.check_runs()  # two processes on one store
    rig.set_config(dry_run=True)
    await first.sync(rig.now())  # opened, not pushed
    with rig.store.read() as tx:
        stale = checks.owed(tx, since=rig.now() - timedelta(hours=1), now=rig.now(),
                            limit=10)
    assert len(stale) == 1 and stale[0].create_started_at is None
    rig.set_config(dry_run=False)
    assert await first.sync(rig.now()) == 1  # pushed between the other's read and lease

    monkeypatch.setattr(checks, "owed", lambda tx, **kw: stale)
    assert await second.sync(rig.now()) == 0
    assert len(rig.github_check_runs()) == 1


async def test_an_installation_without_checks_write_is_logged_once_shown_and_left_alone(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    inst = rig.world.installations[rig.installation_id]
    inst.permissions.pop("checks")
    pr = rig.add_pull()
    job = rig.opened(pr)
    rig.queue.enqueue(job, now=rig.now())
    health = Health(rig.store)
    loop = rig.check_runs(health=health)
    health.check_runs_started()

    for _ in range(3):
        await loop.sync(rig.now())
    refused = [r for r in rig.world.requests if "check-runs" in r.path]
    assert len(refused) == 1 and rig.github_check_runs() == []
    assert sum("checks: write" in r.getMessage() for r in caplog.records) == 1
    assert health.report(rig.now())["checks"]["check_runs"]["status"] == DEGRADED  # type: ignore[index]

    # The review itself still runs and posts.
    claim = rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit)
    assert claim is not None
    rig.complete(claim, findings=[ANCHORED])
    await rig.publisher().publish_key(job.dedupe_key)
    assert len(rig.reviews(pr)) == 1

    # Granted later: after the wait the check run shows how it ended.
    inst.permissions["checks"] = "write"
    rig.advance(hours=1, seconds=1)
    await loop.sync(rig.now())
    (run,) = rig.github_check_runs()
    assert run.conclusion == "success"
    assert health.report(rig.now())["checks"]["check_runs"]["status"] == OK  # type: ignore[index]
