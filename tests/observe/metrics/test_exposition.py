"""``GET /metrics``: the names and labels, the state read from the store, the admin token,
a store that is down, several real processes in prometheus_client's multiprocess mode,
and the Grafana dashboard in deploy/ using only names that exist."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.config.schema import BudgetConfig
from service.observe.metrics.exposition import render
from service.observe.metrics.instruments import Metrics
from service.observe.metrics.state import StoreState
from tests.kit.paths import CHECKOUT
from tests.kit.stores import new_sqlite_store
from tests.observe.metrics.scrape import P, samples
from tests.webhook_env import NOW, open_env

ROOT = CHECKOUT
DASHBOARD = ROOT / "deploy" / "grafana" / "pr-review-agent.json"
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
        metrics.delivery_log_read("ok", redelivered=1, fetched=1)
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
