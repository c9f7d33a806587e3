"""What the process counts: a delivery by its outcome's class, never its detail; the
governor's admissions by rung and refusals by reason."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.config.schema import BudgetConfig
from service.model.jobs import Job
from service.observe.metrics.exposition import render
from service.observe.metrics.instruments import Metrics, outcome_class
from service.observe.metrics.state import StoreState
from service.storage.sqlite import SqliteStore
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.observe.metrics.scrape import P, env, samples  # noqa: F401 - the fixture
from tests.webhook_env import NOW


def _claimable(store: SqliteStore) -> QueueDriver:
    queue = QueueDriver(store)
    queue.enqueue(Job(kind="pr_opened", repo="acme/widgets", pr_number=1, actor_id=7,
                      head_sha="b" * 40), now=NOW)
    queue.enqueue(Job(kind="mention", repo="acme/widgets", pr_number=2, actor_id=7,
                      comment_id=5, comment_source="issue", command="review"), now=NOW)
    return queue


def test_the_governor_counts_admissions_by_rung_and_refusals_by_reason(
        tmp_path: Path) -> None:
    store = new_sqlite_store(tmp_path / "state.db")
    try:
        metrics = Metrics()
        queue = _claimable(store)
        config = BudgetConfig(session_tokens=100_000, weekly_tokens=1_000_000,
                              max_run_tokens=10_000, max_reviews_per_pr=1)
        governor = Governor(store, config, clock=lambda: NOW, publish=False, metrics=metrics)
        assert queue.claim(now=NOW, owner="w1", admit=governor.admit) is not None
        off = Governor(store, replace(config, enabled=False), clock=lambda: NOW, publish=False,
                       metrics=metrics)
        assert queue.claim(now=NOW + timedelta(seconds=1), owner="w2", admit=off.admit) is None
        found = samples(render(metrics, StoreState(store, governor, lambda: NOW), {}))
        assert found[(f"{P}_budget_admissions_total", (("rung", "full"),))] == 1
        assert found[(f"{P}_budget_refusals_total",
                      (("reason", "disabled"), ("rung", "exhausted")))] == 1
        assert found[(f"{P}_queue_rows", (("kind", "pr_opened"), ("status", "claimed")))] + \
            found[(f"{P}_queue_rows", (("kind", "mention"), ("status", "claimed")))] == 1
        assert found[(f"{P}_budget_reserved_tokens", (("window", "session"),))] == 10_000
    finally:
        store.close()


@pytest.mark.parametrize(("outcome", "cls"), [
    ("enqueued", "enqueued"), ("closed:cancelled=2", "closed"), ("ignored:draft", "ignored"),
    ("ignored:action:labeled", "ignored"), ("declined:findings=1", "declined"),
    ("installation:created:added=2,removed=0", "installation"),
    ("installation_repositories:added:added=1,removed=0", "installation"),
    ("something new", "other"),
])
def test_a_delivery_is_counted_by_its_outcomes_class_never_its_detail(
        outcome: str, cls: str) -> None:
    assert outcome_class(outcome) == cls
