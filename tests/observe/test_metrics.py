"""``GET /metrics``: the names and labels, the state read from the store, the admin token,
a store that is down, several real processes in prometheus_client's multiprocess mode,
and the Grafana dashboard in deploy/ using only names that exist."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.budget.governor import Governor
from service.config.schema import BudgetConfig
from service.model.jobs import Job
from service.observe.metrics.exposition import render
from service.observe.metrics.instruments import Metrics, outcome_class
from service.observe.metrics.state import StoreState
from service.storage.sqlite import SqliteStore
from tests.kit.paths import CHECKOUT
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.webhook_env import NOW, Env, open_env

ROOT = CHECKOUT
DASHBOARD = ROOT / "deploy" / "grafana" / "pr-review-agent.json"
P = "pr_review_agent"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str | bytes) -> Samples:
    body = text.decode() if isinstance(text, bytes) else text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


@pytest.fixture(name="env")
async def env_fixture(tmp_path: Path):  # type: ignore[no-untyped-def]
    # The admin routes opened: these tests are about what they show (the token's own
    # tests are below).
    async with open_env(tmp_path, server={"admin": "open"}) as env:
        yield env


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


@pytest.mark.anyio
async def test_deliveries_are_counted_and_the_queue_is_read_from_the_store(env: Env) -> None:
    pull = env.world.pull("acme/widgets", 1)
    await env.sender.send("pull_request", env.world.payloads.pull_request("opened", pull))
    await env.sender.send("pull_request", env.world.payloads.pull_request("labeled", pull))
    await env.post("pull_request", b"{", delivery_id="broken")  # signed, but not JSON: 400
    await env.post("pull_request", b"{}", delivery_id="forged", secret="wrong")
    response = await env.client.get("/metrics")
    assert response.status_code == 200
    found = samples(response.text)
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "enqueued"),))] == 1
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "ignored"),))] == 1
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "unparseable"),))] == 1
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "rejected"),))] == 1
    assert found[(f"{P}_webhook_seconds_count", ())] == 4
    assert found[(f"{P}_queue_rows", (("kind", "pr_opened"), ("status", "pending")))] == 1
    assert found[(f"{P}_queue_rows", (("kind", "mention"), ("status", "pending")))] == 0
    assert found[(f"{P}_store_up", ())] == 1
    budget = (await env.client.get("/budget")).json()
    for window in budget["windows"]:
        labels = (("window", window["name"]),)
        assert found[(f"{P}_budget_limit_tokens", labels)] == window["limit"]
        assert found[(f"{P}_budget_utilisation_ratio", labels)] == window["utilisation"]
    assert found[(f"{P}_budget_rung", (("rung", budget["mode"]),))] == 1


@pytest.mark.anyio
async def test_metrics_need_the_admin_token_when_one_is_set(tmp_path: Path) -> None:
    (tmp_path / "admin").write_text("s3cret-admin\n")
    async with open_env(tmp_path, server={"admin_token_file": "admin"}) as env:
        refused = await env.client.get("/metrics")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        wrong = await env.client.get("/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        allowed = await env.client.get("/metrics",
                                       headers={"Authorization": "Bearer s3cret-admin"})
        assert allowed.status_code == 200


@pytest.mark.anyio
async def test_a_store_that_is_down_is_a_series_not_a_failed_scrape(env: Env) -> None:
    await env.sender.send("pull_request", env.world.payloads.pull_request(
        "opened", env.world.pull("acme/widgets", 1)))
    env.store.close()
    response = await env.client.get("/metrics")
    assert response.status_code == 200
    found = samples(response.text)
    assert found[(f"{P}_store_up", ())] == 0
    assert not any(name == f"{P}_queue_rows" for name, _ in found)
    assert found[(f"{P}_webhook_deliveries_total", (("outcome", "enqueued"),))] == 1


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


_COUNT_IN_A_PROCESS = """
from service.observe.metrics.instruments import Metrics
m = Metrics()
m.claimed(True)
m.engine_finished("completed", 42.0, 1000)
m.rate_limit(31, {remaining})
"""


def test_several_processes_add_up_in_multiprocess_mode(tmp_path: Path) -> None:
    shared = tmp_path / "prom"
    shared.mkdir()
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(shared)}
    for remaining in (4000, 3500, 4200):  # three real processes, one after another
        subprocess.run([sys.executable, "-c", _COUNT_IN_A_PROCESS.format(remaining=remaining)],
                       env=env, check=True, cwd=ROOT)
    scraped = subprocess.run(
        [sys.executable, "-c",
         "import os, sys; from service.observe.metrics.instruments import Metrics; "
         "from service.observe.metrics.exposition import render; "
         "sys.stdout.write(render(Metrics(), None, os.environ).decode())"],
        env=env, check=True, cwd=ROOT, capture_output=True, text=True).stdout
    found = samples(scraped)
    assert found[(f"{P}_queue_claims_total", (("outcome", "claimed"),))] == 3
    assert found[(f"{P}_engine_runs_total", (("stop_reason", "completed"),))] == 3
    assert found[(f"{P}_engine_tokens_total", ())] == 3000
    assert found[(f"{P}_engine_run_seconds_count", ())] == 3
    # the lowest reading any process saw: the one to alert on
    assert found[(f"{P}_github_rate_limit_remaining", (("installation", "31"),))] == 3500


def _every_name(tmp_path: Path) -> set[str]:
    """Every sample name the service can expose, each instrument used once."""
    store = new_sqlite_store(tmp_path / "names.db")
    try:
        metrics = Metrics()
        metrics.claimed(True)
        metrics.admitted("full")
        metrics.refused("reduced", "pacer")
        metrics.engine_finished("completed", 1.0, 10)
        metrics.delivery("enqueued", 0.01)
        metrics.poll_cycle("ok", full=1, not_modified=1)
        metrics.rate_limit(1, 10)
        metrics.published("published")
        config = BudgetConfig(session_tokens=100_000, weekly_tokens=1_000_000,
                              max_run_tokens=10_000, monthly_usd=100)
        governor = Governor(store, config, clock=lambda: NOW, publish=False)
        text = render(metrics, StoreState(store, governor, lambda: NOW), {})
    finally:
        store.close()
    return {name for name, _ in samples(text)}


def test_the_grafana_dashboard_uses_only_names_that_exist(tmp_path: Path) -> None:
    names = _every_name(tmp_path)
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    used = {m for e in exprs for m in re.findall(rf"\b{P}_[a-z_]+\b", e)}
    assert used, "the dashboard queries nothing"
    assert sorted(used - names) == []
    # and every instrument has a panel
    families = {re.sub(r"_(total|bucket|count|sum|created)$", "", n) for n in names}
    shown = {re.sub(r"_(total|bucket|count|sum)$", "", n) for n in used}
    assert sorted(families - shown) == []
