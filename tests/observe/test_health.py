"""``GET /healthz`` (the ``Health`` registry behind it) and ``GET /budget``."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from service.observe.health import DEGRADED, FAILING, NOT_RUNNING, OK, STALE_INTERVALS, Health
from service.storage.sqlite import HEAD_VERSION, SqliteStore
from tests.kit.stores import new_sqlite_store
from tests.webhook_env import NOW, Env, open_env

INTERVAL = timedelta(seconds=300)



@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with new_sqlite_store(tmp_path / "state.db") as opened:
        yield opened


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with open_env(tmp_path) as opened:
        yield opened


def status(health: Health) -> tuple[str, dict[str, str]]:
    report = health.report(NOW)
    checks = report["checks"]
    assert isinstance(checks, dict)
    return str(report["status"]), {name: check["status"] for name, check in checks.items()}


# -- the registry -----------------------------------------------------------------------------


def test_a_report_waiting_on_the_store_never_holds_up_a_component_reporting(
        store: SqliteStore) -> None:
    """The report reads the store (the breaker lives there) on a worker thread; in an
    outage that read waits out the store's timeout. Components report from the event
    loop meanwhile (the poller standing by): their reports must not wait for it."""
    probing, release = threading.Event(), threading.Event()

    def hung_breaker(now: datetime) -> tuple[bool, datetime | None]:
        probing.set()
        release.wait(60)
        return False, None

    health = Health(store, breaker_probe=hung_breaker)
    health.poller_started(INTERVAL, NOW)
    reporting = threading.Thread(target=health.report, args=(NOW,))
    reporting.start()
    try:
        assert probing.wait(60)
        reported = threading.Thread(target=health.poller_standing_by, args=(NOW,))
        reported.start()
        reported.join(30)
        assert not reported.is_alive(), "a component's report waited for the store"
    finally:
        release.set()
        reporting.join(60)


def test_with_the_store_unreachable_the_breaker_is_not_asked_a_second_time(
        store: SqliteStore) -> None:
    asked: list[datetime] = []
    health = Health(store, breaker_probe=lambda now: asked.append(now) or (False, None))
    store.close()
    overall, checks = status(health)
    assert (overall, checks["store"], checks["breaker"]) == (FAILING, FAILING, DEGRADED)
    assert asked == []


def test_a_web_only_process_is_ok_with_nothing_else_running(store: SqliteStore) -> None:
    overall, checks = status(Health(store))

    assert overall == OK
    assert checks == {"store": OK, "poller": NOT_RUNNING, "workers": NOT_RUNNING,
                      "breaker": OK, "github_auth": OK, "engine": NOT_RUNNING,
                      "check_runs": NOT_RUNNING, "config": OK}
    assert Health(store).report(NOW)["checks"]["store"] == {  # type: ignore[index]
        "status": OK, "schema_version": HEAD_VERSION, "expected_version": HEAD_VERSION}


def test_an_installation_without_the_checks_permission_degrades_check_runs_until_allowed(
        store: SqliteStore) -> None:
    health = Health(store)
    health.check_runs_started()
    assert status(health)[1]["check_runs"] == OK
    health.check_runs_forbidden(42, NOW, "Resource not accessible by integration")

    overall, checks = status(health)
    assert (overall, checks["check_runs"]) == (DEGRADED, DEGRADED)
    shown = health.report(NOW)["checks"]["check_runs"]  # type: ignore[index]
    assert shown["forbidden"] == {"42": {"since": NOW.isoformat(),
                                         "detail": "Resource not accessible by integration"}}
    assert "checks: write" in shown["detail"]
    health.check_runs_allowed(42)
    assert status(health) == (OK, {**checks, "check_runs": OK})


def test_the_poller_is_degraded_after_three_silent_intervals(store: SqliteStore) -> None:
    health = Health(store)
    health.poller_started(INTERVAL, NOW - INTERVAL * 10)
    health.poller_cycle_succeeded(NOW - INTERVAL * STALE_INTERVALS)
    assert status(health)[1]["poller"] == OK

    health.poller_cycle_succeeded(NOW - INTERVAL * STALE_INTERVALS - timedelta(seconds=1))
    overall, checks = status(health)
    assert (overall, checks["poller"]) == (DEGRADED, DEGRADED)
    poller = health.report(NOW)["checks"]["poller"]  # type: ignore[index]
    assert poller["age_seconds"] == 901.0 and poller["interval_seconds"] == 300.0


def test_a_poller_that_never_finished_a_cycle_is_judged_from_its_start(
        store: SqliteStore) -> None:
    health = Health(store)
    health.poller_started(INTERVAL, NOW - INTERVAL)
    assert status(health)[1]["poller"] == OK

    health.poller_started(INTERVAL, NOW - INTERVAL * 4)
    assert status(health)[1]["poller"] == DEGRADED
    assert "no successful cycle" in health.report(NOW)["checks"]["poller"]["detail"]  # type: ignore[index]


def test_dead_workers_degrade_until_replaced(store: SqliteStore) -> None:
    health = Health(store)
    health.workers_started(["w1", "w2"])
    health.worker_died("w2", "engine crashed")

    assert status(health)[0] == DEGRADED
    workers = health.report(NOW)["checks"]["workers"]  # type: ignore[index]
    assert workers == {"status": DEGRADED, "alive": 1, "expected": 2,
                       "dead": {"w2": "engine crashed"}}

    health.worker_restarted("w2")
    assert status(health)[0] == OK


def test_a_tripped_breaker_degrades(store: SqliteStore) -> None:
    breaker: list[tuple[bool, datetime | None]] = [(True, NOW + timedelta(hours=1))]
    health = Health(store, breaker_probe=lambda now: breaker[-1])
    assert status(health)[1]["breaker"] == DEGRADED

    breaker.append((False, None))
    assert status(health)[0] == OK


def test_github_auth_follows_the_latest_outcome(store: SqliteStore) -> None:
    health = Health(store)
    health.auth_succeeded(NOW - timedelta(minutes=5), "installation token")
    health.auth_failed(NOW - timedelta(minutes=1), "401 from POST /app/installations/1/...")
    assert status(health)[1]["github_auth"] == DEGRADED

    health.auth_succeeded(NOW, "installation token")
    auth = health.report(NOW)["checks"]["github_auth"]  # type: ignore[index]
    assert auth["status"] == OK and auth["last_failure"].startswith("401")


def test_a_closed_store_is_failing(tmp_path: Path) -> None:
    store = new_sqlite_store(tmp_path / "state.db")
    health = Health(store)
    store.close()

    overall, checks = status(health)
    assert (overall, checks["store"]) == (FAILING, FAILING)


def test_a_store_at_another_schema_version_is_failing(store: SqliteStore) -> None:
    with sqlite3.connect(store.path) as db:
        db.execute(f"PRAGMA user_version = {HEAD_VERSION + 1}")

    check = Health(store).report(NOW)["checks"]["store"]  # type: ignore[index]
    assert check["status"] == FAILING and str(HEAD_VERSION + 1) in check["error"]


def test_reports_refuse_naive_times(store: SqliteStore) -> None:
    health = Health(store)
    with pytest.raises(ValueError, match="naive"):
        health.report(NOW.replace(tzinfo=None))
    with pytest.raises(ValueError, match="naive"):
        health.auth_failed(NOW.replace(tzinfo=None), "x")


def test_reports_out_of_order_are_refused(store: SqliteStore) -> None:
    health = Health(store)
    with pytest.raises(RuntimeError):
        health.poller_cycle_succeeded(NOW)
    with pytest.raises(RuntimeError):
        health.worker_died("w1", "x")


# -- the endpoints ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_healthz_answers_200_when_ok_or_degraded_and_503_when_failing(env: Env) -> None:
    ok = await env.client.get("/healthz")
    assert ok.status_code == 200 and ok.json()["status"] == OK
    assert ok.json()["checks"]["poller"] == {"status": NOT_RUNNING}

    env.health.auth_failed(NOW, "GET /app failed: connection failed")
    degraded = await env.client.get("/healthz")
    assert degraded.status_code == 200 and degraded.json()["status"] == DEGRADED

    env.store.close()
    failing = await env.client.get("/healthz")
    assert failing.status_code == 503 and failing.json()["status"] == FAILING


BUDGET_KEYS = {"now", "enabled", "mode", "tightest", "max_run_tokens", "windows"}
WINDOW_KEYS = {"name", "duration_seconds", "limit", "spent", "reserved", "remaining",
               "utilisation", "frees_at"}


@pytest.mark.anyio
async def test_the_admin_routes_refuse_everyone_without_a_token(env: Env) -> None:
    """Closed by default: with no token configured, no request can present one."""
    for path in ("/budget", "/metrics", "/status"):
        response = await env.client.get(path)
        assert response.status_code == 403, path
        assert response.headers["cache-control"] == "no-store"
        assert "server.admin_token_file" in response.text


@pytest.mark.anyio
async def test_budget_is_the_snapshot_when_the_admin_routes_are_open(tmp_path: Path) -> None:
    async with open_env(tmp_path, server={"admin": "open"}) as env:
        response = await env.client.get("/budget")

    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert BUDGET_KEYS <= set(body)
    assert body["now"] == NOW.isoformat()
    assert [w["name"] for w in body["windows"]] == ["session", "daily", "weekly"]
    assert all(WINDOW_KEYS <= set(w) for w in body["windows"])


@pytest.mark.anyio
async def test_budget_requires_the_admin_bearer_token_when_one_is_set(tmp_path: Path) -> None:
    (tmp_path / "admin").write_text("s3cret-admin\n")
    async with open_env(tmp_path, server={"admin_token_file": "admin"}) as env:
        for headers in ({}, {"Authorization": "Bearer wrong"},
                        {"Authorization": "Basic s3cret-admin"},
                        {"Authorization": "Bearer s3cret-admin-and-more"},
                        {"Authorization": "s3cret-admin"}):
            refused = await env.client.get("/budget", headers=headers)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"] == "Bearer"
            assert "s3cret" not in refused.text

        allowed = await env.client.get("/budget",
                                        headers={"Authorization": "Bearer s3cret-admin"})
        assert allowed.status_code == 200 and BUDGET_KEYS <= set(allowed.json())


@pytest.mark.anyio
async def test_budget_is_503_when_the_store_is_gone(tmp_path: Path) -> None:
    async with open_env(tmp_path, server={"admin": "open"}) as env:
        env.store.close()
        assert (await env.client.get("/budget")).status_code == 503


def test_a_standby_poller_is_healthy_while_it_keeps_asking(store: SqliteStore) -> None:
    health = Health(store)
    health.poller_started(INTERVAL, NOW - INTERVAL * 10)
    health.poller_standing_by(NOW - INTERVAL)
    poller = health.report(NOW)["checks"]["poller"]  # type: ignore[index]
    assert poller["status"] == OK and poller["standby"] is True
    assert health.report(NOW + INTERVAL * 5)["checks"]["poller"]["status"] == DEGRADED  # type: ignore[index]
    health.poller_cycle_succeeded(NOW)  # it leads now
    assert "standby" not in health.report(NOW)["checks"]["poller"]  # type: ignore[index]
