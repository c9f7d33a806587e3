"""What GET /status reads in one pass from the shared store: what waits, shown from the
next in line."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from service.app.status_view import WAITING_SHOWN, read_status
from service.budget.governor import Governor
from service.config.schema import BudgetConfig
from service.observe.health import Health
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.queue_helpers import mention, opened
from tests.webhook_env import NOW


def test_what_waits_is_shown_from_the_next_in_line(tmp_path: Path) -> None:
    with new_sqlite_store(tmp_path / "state.db") as store:
        queue = QueueDriver(store)
        for n in range(1, WAITING_SHOWN + 6):  # more waiting than the page shows
            queue.enqueue(opened(n), now=NOW + timedelta(seconds=n))
        config = BudgetConfig(session_tokens=100_000, weekly_tokens=1_000_000,
                              max_run_tokens=10_000)
        view = read_status(store, Governor(store, config, publish=False), Health(store),
                           NOW + timedelta(minutes=1))
    shown = [w.row.pr_number for w in view.waiting]
    assert shown == list(range(1, WAITING_SHOWN + 1))  # the oldest, in claim order
    assert view.queue["pending"] == WAITING_SHOWN + 5


def test_each_run_is_shown_with_its_kind(tmp_path: Path) -> None:
    with new_sqlite_store(tmp_path / "state.db") as store:
        queue = QueueDriver(store)
        config = BudgetConfig(session_tokens=100_000, weekly_tokens=1_000_000,
                              max_run_tokens=10_000)
        governor = Governor(store, config, publish=False, ask_run_tokens=2_000)
        for n, job in enumerate((opened(1), mention(2, 5, command="ask"),
                                 mention(3, 6, command="describe"))):
            queue.enqueue(job, now=NOW + timedelta(seconds=n))
            assert queue.claim(now=NOW + timedelta(seconds=n), owner=f"w{n}",
                               admit=governor.admit) is not None
        view = read_status(store, governor, Health(store), NOW + timedelta(minutes=1))
    assert {r.dedupe_key: (r.kind, r.tokens) for r in view.runs} == {
        opened(1).dedupe_key: ("pr_opened", 10_000), "mention:o/r:2:5": ("ask", 2_000),
        "mention:o/r:3:6": ("describe", 10_000)}
