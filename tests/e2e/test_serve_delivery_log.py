"""``serve`` end to end through an outage: the webhooks GitHub tried to send while the App
was down are in its delivery log; once ``serve`` is back, it asks GitHub for them again,
and every trigger is enqueued once."""

from __future__ import annotations

import signal
from collections.abc import Callable

from tests.e2e.conftest import E2E
from tests.e2e.harness import PR, REPO, review_steps
from tests.kit.waiting import wait_for

ATTEMPTS = "/app/hook/deliveries/*/attempts"


def test_deliveries_sent_while_serve_was_down_arrive_once_it_is_back(
        make_e2e: Callable[..., E2E]) -> None:
    e2e = make_e2e(pr_state="closed")
    e2e.configure(review_steps(), review_steps(),
                  poller={"interval_seconds": 3600, "delivery_log_seconds": 1})
    first = e2e.serve()
    first.wait_ready(polled=True)
    assert first.stop(signal.SIGTERM) == 0

    # While it is down: the pull request is reopened, a person asks for a review, and
    # GitHub's deliveries of both fail to connect.
    e2e.sim.reopen()
    comment = e2e.sim.client.post("/_simulator/issue-comments", json={
        "repo": REPO, "number": PR, "user": "alice", "body": "@claude review"})
    assert comment.status_code == 201, comment.text
    hook = {"url": f"http://127.0.0.1:{e2e.port}/webhook"}
    lost = e2e.sim.client.post("/_simulator/webhooks/deliver", json=hook).json()["delivered"]
    assert [d["status"] for d in lost] == [None, None]
    guids = sorted(d["delivery_id"] for d in lost)

    second = e2e.serve()
    second.wait_ready(polled=True)
    # The reader asks GitHub to send each again (once), and GitHub does.
    wait_for("both redeliveries asked for", lambda: len(
        [r for r in e2e.sim.requests("POST", ATTEMPTS) if r["status"] == 202]) == 2 or None,
        alive=second.alive, on_timeout=second.text)
    again = e2e.sim.client.post("/_simulator/webhooks/deliver", json=hook).json()["delivered"]
    assert sorted(d["delivery_id"] for d in again) == guids
    assert all(d["status"] in (200, 202) for d in again)

    head = e2e.sim.seeded.head_sha
    keys = [f"pr_opened:{REPO}:{PR}:{head}"]
    wait_for("both triggers queued", lambda: len(e2e.db(
        "SELECT dedupe_key FROM queue")) == 2 or None, alive=second.alive)
    queued = [key for (key,) in e2e.db("SELECT dedupe_key FROM queue ORDER BY dedupe_key")]
    assert keys[0] in queued and any(k.startswith(f"mention:{REPO}:{PR}:") for k in queued)
    assert sorted(g for (g,) in e2e.db("SELECT delivery_id FROM deliveries")) == guids
    # Nothing asked twice, and the log read from its cursor afterwards.
    wait_for("the redeliveries settled", lambda: e2e.db(
        "SELECT count(*) FROM hook_redeliveries") == [(0,)] or None, alive=second.alive)
    assert len(e2e.sim.requests("POST", ATTEMPTS)) == 2
    assert list(second.messages("asked GitHub to send a failed delivery again"))
    assert second.stop(signal.SIGTERM) == 0
