"""A host killed in the middle of a post, on two hosts sharing one PostgreSQL store.

GitHub has received the review (the simulator performs it, then holds the answer), and
the host that sent it is SIGKILLed before it hears back: its run is recorded, its
publication lease (30 s, renewed while the post runs) is the only sign that someone was
posting. The other host must recognise the dead attempt by that lease, take the run up
once the lease lapses (its maintenance re-offers every 10 s), find the review by its
marker and record it, not post it again: one review on GitHub, the run ``published``, and
not before the dead host's lease ran out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.storage.times import from_db_time
from tests.chaos.accounting import RUN_MARKER, app_posts
from tests.chaos.rig import ChaosRig, RigSettings
from tests.databases import as_url, throwaway_database


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[ChaosRig]:
    with throwaway_database() as conninfo:
        url, password = as_url(conninfo)
        rig = ChaosRig(tmp_path / "handover", RigSettings(
            repos=1, existing_pulls=1, new_pulls=0, engine_seconds=(0.1, 0.2), workers=1,
            hosts=2, store_url=url, store_password=password))
        try:
            rig.lay_out()
            rig.start_simulator()
            for host in (0, 1):
                rig.start_serve(host=host)
            rig.wait_seeded()
            yield rig
        finally:
            rig.close()


@pytest.mark.slow(50)
def test_a_host_killed_mid_post_is_taken_over_by_its_lease_and_posted_once(
        rig: ChaosRig) -> None:
    repo = rig.repos[0]
    number = rig.existing[repo][0].number
    # GitHub performs the review, then its answer hangs far past anything that waits.
    rig.fault(method="POST", path_glob=f"/repos/{repo}/pulls/*/reviews", delay=600.0,
              applied=True, times=1)
    comment = rig.comment(repo, number, "@claude review", emit=True)
    key = f"mention:{repo}:{number}:{comment}"
    rig.deliver(rig.take_events(), [1])  # to host 1; either host may claim it

    rig.until("the review to reach GitHub", lambda: [
        r for r in rig.requests()
        if r["method"] == "POST" and r["path"].endswith("/reviews")])
    [owner] = rig.until("the claim's owner", lambda: [
        row["owner"] for row in rig.rows("SELECT owner FROM queue WHERE dedupe_key = ?",
                                         (key,))])
    pid = int(owner.split(":")[1])
    [posting] = [h for h, s in rig.serves.items() if s.process.pid == pid]
    assert rig.rows("SELECT publish_outcome FROM runs WHERE dedupe_key = ?", (key,)) == [
        {"publish_outcome": None}]  # the post is in flight, unanswered

    rig.kill_serve(host=posting)
    [dead_lease] = [row["publish_lease_until"] for row in rig.rows(
        "SELECT publish_lease_until FROM runs WHERE dedupe_key = ?", (key,))]
    [(outcome, published_at)] = rig.until("the other host to record the run", lambda: [
        (row["publish_outcome"], row["published_at"]) for row in rig.rows(
            "SELECT publish_outcome, published_at FROM runs WHERE dedupe_key = ?", (key,))
        if row["publish_outcome"] is not None])

    assert outcome == "published"
    # Taken over by the lease, not by luck: only once the dead host's lease had lapsed
    # (its length, 30 s, and the 10 s re-offer bound how long that takes: PUBLISHER.md).
    assert dead_lease is not None and from_db_time(str(published_at)) >= from_db_time(
        str(dead_lease))
    markers = [m for body in app_posts(rig.posts()) for m in RUN_MARKER.findall(body)]
    assert markers.count(key) == 1, markers
    [run] = rig.rows("SELECT publish_attempts FROM runs WHERE dedupe_key = ?", (key,))
    assert run["publish_attempts"] == 2  # the dead host's, and the live one's lookup
