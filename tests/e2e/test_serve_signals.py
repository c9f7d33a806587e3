"""``serve`` under signals: SIGHUP reloads the budget (and survives a broken file);
SIGTERM stops it without losing a review; SIGKILL loses nothing but the killed attempt,
which the ledger still charges."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    RUN_TOKENS,
    HarnessServe,
    review_steps,
    started_calls,
)
from tests.kit.waiting import wait_for

MAX_RUN = 50_000
ADMIN_TOKEN = "e2e-admin-token-81d2"  # a test value


def _limits(budget: dict[str, Any]) -> dict[str, int]:
    return {w["name"]: w["limit"] for w in budget["windows"]}


def _open_and_wait_for_engine(e2e: E2E, serve: HarnessServe) -> str:
    """Deliver the opened webhook and wait until the fake ``claude`` has started."""
    serve.wait_ready()
    response = serve.post_webhook("pull_request", e2e.sim.pull_request_payload("opened"),
                                  delivery_id="e2e-signals-1")
    assert response.status_code == 202, response.text
    assert e2e.scenario is not None
    wait_for("the engine to start", lambda: started_calls(e2e.scenario),
             alive=serve.alive, on_timeout=serve.text)
    [key] = response.json()["enqueued"]
    return str(key)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_sighup_reloads_the_budget_and_a_broken_file_changes_nothing(e2e: E2E) -> None:
    e2e.service_dir.mkdir()
    (e2e.service_dir / "admin-token").write_text(ADMIN_TOKEN)
    config = e2e.configure(server={"admin_token_file": "admin-token"})
    serve = e2e.serve()
    serve.wait_ready(polled=False)
    unauthorised = serve.client.get("/budget")
    assert unauthorised.status_code == 401
    assert unauthorised.headers["www-authenticate"] == "Bearer"
    before = serve.budget(ADMIN_TOKEN)
    assert _limits(before)["session"] == 400_000  # 40 % of 1,000,000
    good = config.read_text()

    config.write_text(good.replace("session_tokens: 1000000", "session_tokens: [oops"))
    serve.signal(signal.SIGHUP)
    [refused] = wait_for("the reload to be refused", lambda: list(
        serve.messages("config reload refused")), alive=serve.alive, on_timeout=serve.text)
    assert refused["level"] == "ERROR" and refused["logger"] == "service.app.reload"
    health = serve.healthz()  # still serving, and saying the file in force is the old one
    assert health is not None and health["status"] == "degraded"
    assert health["checks"]["config"]["status"] == "degraded"
    assert "invalid YAML at line" in health["checks"]["config"]["detail"]
    after = serve.budget(ADMIN_TOKEN)
    assert _limits(after) == _limits(before) and after["max_run_tokens"] == MAX_RUN

    config.write_text(good.replace("session_tokens: 1000000", "session_tokens: 2000000")
                      .replace("interval_seconds: 1", "interval_seconds: 2"))
    serve.signal(signal.SIGHUP)
    wait_for("the new budget on /budget",
             lambda: _limits(serve.budget(ADMIN_TOKEN))["session"] == 800_000,
             on_timeout=serve.text)
    healed = serve.healthz()
    assert healed is not None and healed["checks"]["config"] == {"status": "ok"}
    [restart] = wait_for("the restart warning", lambda: list(
        serve.messages("need a restart")))
    assert restart["level"] == "WARNING" and "poller" in restart["message"]
    assert [line["message"] for line in serve.messages("config reloaded")] == [
        "config reloaded: budget"]
    assert e2e.db("SELECT json_extract(policy, '$.session_tokens') FROM budget_policy"
                  ) == [(2_000_000,)]

    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0
    assert ADMIN_TOKEN not in serve.text()


def test_sigterm_during_a_review_lets_it_finish_and_exits_0(e2e: E2E) -> None:
    e2e.configure(review_steps(sleep=2))
    serve = e2e.serve()
    key = _open_and_wait_for_engine(e2e, serve)

    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=30) == 0
    # The job in progress had its grace period: it finished and posted before the exit.
    assert len(e2e.sim.reviews()) == 1
    assert e2e.db("SELECT stop_reason FROM ledger WHERE dedupe_key = ?", key) == [
        ("completed",)]
    assert any("1 job(s) running" in line["message"] for line in serve.lines())

    restarted = e2e.serve()
    restarted.wait_ready()
    time.sleep(1.5)  # a few claims and a maintenance round after the restart
    [review] = e2e.sim.reviews()
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    assert e2e.scenario is not None and e2e.scenario.calls == 1
    restarted.signal(signal.SIGINT)
    assert restarted.wait(timeout=20) == 0
    e2e.assert_no_secrets()


def test_a_second_sigterm_cancels_the_review_and_the_restart_posts_it_once(e2e: E2E) -> None:
    e2e.configure(review_steps(sleep=60), review_steps())
    serve = e2e.serve()
    key = _open_and_wait_for_engine(e2e, serve)
    assert e2e.scenario is not None
    [first] = started_calls(e2e.scenario)

    serve.signal(signal.SIGTERM)
    wait_for("the grace period to start", lambda: list(serve.messages("job(s) running")))
    started = time.monotonic()
    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0
    assert time.monotonic() - started < 20  # not the 30 s grace period
    assert not _pid_alive(first["pid"])  # the engine's process group went with the job
    # Cancelled: charged in full (the engine ran, no result came back), row handed back.
    assert e2e.db("SELECT stop_reason, used_tokens, usage_confidence FROM ledger"
                  " WHERE dedupe_key = ?", key) == [("infrastructure", MAX_RUN, "unavailable")]
    assert e2e.db("SELECT status, attempts FROM queue") == [("pending", 1)]
    assert e2e.sim.reviews() == []

    restarted = e2e.serve()
    [review] = wait_for("the review after the restart", e2e.sim.reviews,
                        alive=restarted.alive, on_timeout=restarted.text)
    assert review["commit_id"] == e2e.sim.seeded.head_sha
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    wait_for("the second attempt to settle", lambda: len(e2e.db(
        "SELECT 1 FROM ledger WHERE dedupe_key = ? AND settled_at IS NOT NULL", key)) == 2)
    assert e2e.db("SELECT stop_reason, used_tokens FROM ledger WHERE dedupe_key = ?"
                  " ORDER BY id", key) == [("infrastructure", MAX_RUN),
                                           ("completed", RUN_TOKENS)]
    assert e2e.db("SELECT status, attempts FROM queue") == [("done", 2)]
    restarted.signal(signal.SIGTERM)
    assert restarted.wait(timeout=20) == 0
    assert len(e2e.sim.reviews()) == 1
    e2e.assert_no_secrets()


def test_sigkill_during_a_review_the_restart_posts_it_once_and_the_ledger_charges_both(
        e2e: E2E) -> None:
    # A short lease, so the restarted process may take the row over within seconds.
    e2e.configure(review_steps(sleep=60), review_steps(), workers={"lease_seconds": 3})
    serve = e2e.serve()
    key = _open_and_wait_for_engine(e2e, serve)
    assert e2e.scenario is not None
    [first] = started_calls(e2e.scenario)

    serve.signal(signal.SIGKILL)
    assert serve.wait(timeout=10) == -signal.SIGKILL
    # The engine runs in a process group of its own and outlives a SIGKILLed parent; a
    # crashed host or container would take it too.
    os.killpg(first["pgid"], signal.SIGKILL)
    assert e2e.db("SELECT stop_reason, settled_at FROM ledger WHERE dedupe_key = ?",
                  key) == [(None, None)]  # the reservation is open, the row still leased

    restarted = e2e.serve()
    [review] = wait_for("the review after the restart", e2e.sim.reviews,
                        alive=restarted.alive, on_timeout=restarted.text)
    assert review["commit_id"] == e2e.sim.seeded.head_sha
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    wait_for("the second attempt to settle", lambda: len(e2e.db(
        "SELECT 1 FROM ledger WHERE dedupe_key = ? AND settled_at IS NOT NULL", key)) == 2)
    # The killed attempt stays charged in full as lost; the new one what it used.
    assert e2e.db("SELECT stop_reason, used_tokens, usage_confidence FROM ledger"
                  " WHERE dedupe_key = ? ORDER BY id", key) == [
        ("lost", MAX_RUN, "unavailable"), ("completed", RUN_TOKENS, "exact")]
    assert e2e.db("SELECT status, attempts FROM queue") == [("done", 2)]
    assert e2e.db("SELECT COUNT(*) FROM runs") == [(1,)]
    [lost] = restarted.messages("closed the reservation of a lapsed lease as lost")
    assert lost["dedupe_key"] == key
    restarted.signal(signal.SIGTERM)
    assert restarted.wait(timeout=20) == 0
    assert len(e2e.sim.reviews()) == 1
    e2e.assert_no_secrets()
    assert e2e.scenario.calls == 2
