"""The roles as separate processes on one store (``serve --role web|poller|worker``), each
killed or restarted on its own — the holes a single ``--role all`` could not show.

1. A worker SIGKILLed while it holds a claim, when the budget is spent by that very claim:
   the next worker's claim admits nothing, and must still hand the row back to
   ``pending`` (closing the dead attempt's reservation as ``lost``); the person who asked
   then gets the one notice a waiting request is owed.
2. A poller restarted while pull requests are updated by a bot, a stranger and an allowed
   person, with ``triggers.on_push``: the restart enqueues nothing.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.chaos.rig import ChaosRig, RigSettings

T = TypeVar("T")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[ChaosRig]:
    rig = ChaosRig(tmp_path / "roles", RigSettings(
        repos=1, existing_pulls=2, new_pulls=1, workers=1, lease_seconds=6,
        wall_clock_seconds=5, poll_interval=1, session_tokens=30_000,
        max_run_tokens=30_000, hang=("org1/repo1#1",)))
    try:
        rig.lay_out()
        rig.start_simulator()
        yield rig
    finally:
        rig.close()


@pytest.mark.slow(40)
def test_a_dead_workers_claim_is_handed_back_while_the_budget_admits_nothing(
        rig: ChaosRig) -> None:
    repo = rig.repos[0]
    web = rig.start_role("web")
    rig.wait_ready(web)
    first = rig.start_role("worker")
    comment = rig.comment(repo, 1, "@claude review", emit=True)
    assert rig.deliver(rig.take_events()) == [202]
    key = f"mention:{repo}:1:{comment}"
    # The run hangs (the engine plan says so); its reservation fills the session window.
    rig.until("the engine to start", rig.engine_runs)
    rig.stop(first, signal.SIGKILL)
    rows = rig.rows("SELECT status FROM queue WHERE dedupe_key = ?", (key,))
    assert rows == [{"status": "claimed"}]

    rig.start_role("worker")  # the next worker: it admits nothing, the window is full

    def recovered() -> list[dict[str, Any]]:
        return rig.rows("SELECT status, attempts, owner FROM queue WHERE dedupe_key = ? "
                        "AND status = 'pending'", (key,))

    [row] = rig.until("the dead lease to be recovered", recovered)
    assert (row["attempts"], row["owner"]) == (1, None)
    ledger = rig.rows("SELECT stop_reason, used_tokens FROM ledger WHERE dedupe_key = ?",
                      (key,))
    assert ledger == [{"stop_reason": "lost", "used_tokens": 30_000}]

    def noticed() -> list[Any]:
        return [c for c in rig.posts()["issue_comments"] if c["user"].endswith("[bot]")]

    [notice] = rig.until("the notice of the waiting request", noticed)
    assert notice["number"] == 1 and "frees up" in notice["body"]
    assert rig.rows("SELECT status FROM queue WHERE dedupe_key = ?", (key,)) == [
        {"status": "pending"}]  # still waiting for the budget, visibly


@pytest.mark.slow(15)
def test_a_restarted_poller_enqueues_nothing_for_comments(rig: ChaosRig) -> None:
    repo = rig.repos[0]
    config = rig.config_for("config-push.yaml", triggers={"on_push": True})
    poller = rig.start_role("poller", config)
    rig.until("the poller to seed", rig.seeded)
    asked = rig.comment(repo, 2, "@claude review", emit=False)
    rig.until("the poller to find the mention",
          lambda: rig.rows("SELECT 1 FROM queue WHERE dedupe_key = ?",
                           (f"mention:{repo}:2:{asked}",)))
    assert rig.stop(poller, signal.SIGTERM) == 0
    restarted = rig.start_role("poller", config)
    for n, who in enumerate(("renovate[bot]", "mallory", "bob"), start=1):
        rig.comment(repo, 1 + n % 2, f"update {n}", emit=False, user=who)

    def listings() -> int:
        return sum(1 for r in rig.requests()
                   if r["method"] == "GET" and r["path"].endswith("/pulls"))

    # Several cycles of the restarted poller (one a second) over the updated pulls.
    seen = listings()
    rig.until("three cycles after the restart", lambda: listings() >= seen + 3 or None)
    assert rig.rows("SELECT dedupe_key FROM queue WHERE kind = 'pr_opened'") == []
    assert rig.stop(restarted, signal.SIGTERM) == 0
