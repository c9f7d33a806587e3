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
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.chaos.rig import ChaosRig, RigSettings

T = TypeVar("T")


# A wait for something that must happen, bounded only so that a wedged role fails the test:
# a loaded machine (the suite shares two cores with its own workers) takes its time, and
# a long bound costs nothing when the event comes.
WAIT = 120.0


def until(what: str, probe: Callable[[], T | None], timeout: float, rig: ChaosRig) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.2)
    logs = "\n".join(s.log.read_text(errors="replace")[-3000:] for s in rig.roles)
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


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


@pytest.mark.slow
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
    until("the engine to start", rig.engine_runs, WAIT, rig)
    rig.stop(first, signal.SIGKILL)
    rows = rig.rows("SELECT status FROM queue WHERE dedupe_key = ?", (key,))
    assert rows == [{"status": "claimed"}]

    rig.start_role("worker")  # the next worker: it admits nothing, the window is full

    def recovered() -> list[dict[str, Any]]:
        return rig.rows("SELECT status, attempts, owner FROM queue WHERE dedupe_key = ? "
                        "AND status = 'pending'", (key,))

    [row] = until("the dead lease to be recovered", recovered, WAIT, rig)
    assert (row["attempts"], row["owner"]) == (1, None)
    ledger = rig.rows("SELECT stop_reason, used_tokens FROM ledger WHERE dedupe_key = ?",
                      (key,))
    assert ledger == [{"stop_reason": "lost", "used_tokens": 30_000}]

    def noticed() -> list[Any]:
        return [c for c in rig.posts()["issue_comments"] if c["user"].endswith("[bot]")]

    [notice] = until("the notice of the waiting request", noticed, WAIT, rig)
    assert notice["number"] == 1 and "frees up" in notice["body"]
    assert rig.rows("SELECT status FROM queue WHERE dedupe_key = ?", (key,)) == [
        {"status": "pending"}]  # still waiting for the budget, visibly


@pytest.mark.slow
def test_a_restarted_poller_enqueues_nothing_for_comments(rig: ChaosRig) -> None:
    repo = rig.repos[0]
    config = rig.config_for("config-push.yaml", triggers={"on_push": True})
    poller = rig.start_role("poller", config)
    until("the poller to seed", rig.seeded, WAIT, rig)
    asked = rig.comment(repo, 2, "@claude review", emit=False)
    until("the poller to find the mention",
          lambda: rig.rows("SELECT 1 FROM queue WHERE dedupe_key = ?",
                           (f"mention:{repo}:2:{asked}",)), WAIT, rig)
    assert rig.stop(poller, signal.SIGTERM) == 0
    restarted = rig.start_role("poller", config)
    for n, who in enumerate(("renovate[bot]", "mallory", "bob"), start=1):
        rig.comment(repo, 1 + n % 2, f"update {n}", emit=False, user=who)

    def listings() -> int:
        return sum(1 for r in rig.requests()
                   if r["method"] == "GET" and r["path"].endswith("/pulls"))

    # Several cycles of the restarted poller (one a second) over the updated pulls.
    seen = listings()
    until("three cycles after the restart", lambda: listings() >= seen + 3 or None, WAIT, rig)
    assert rig.rows("SELECT dedupe_key FROM queue WHERE kind = 'pr_opened'") == []
    assert rig.stop(restarted, signal.SIGTERM) == 0
