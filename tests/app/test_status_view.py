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
from tests.queue_helpers import opened
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
