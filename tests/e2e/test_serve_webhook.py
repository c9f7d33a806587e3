"""``serve`` end to end, fed by a webhook: 👀 within a second, then the review, pinned to
the head and carrying its hidden marker; and the log lines that tell the story."""

from __future__ import annotations

import re
import signal
import time

from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    PR,
    REPO,
    RUN_TOKENS,
)
from tests.kit.waiting import wait_for


def test_an_opened_pull_request_is_acknowledged_within_a_second_then_reviewed(
        e2e: E2E) -> None:
    serve = e2e.serve()
    serve.wait_ready()
    head = e2e.sim.seeded.head_sha
    key = f"pr_opened:{REPO}:{PR}:{head}"
    payload = e2e.sim.pull_request_payload("opened")

    sent = time.monotonic()
    response = serve.post_webhook("pull_request", payload, delivery_id="e2e-opened-1")
    assert response.status_code == 202, response.text
    assert response.json()["enqueued"] == [key]
    [eyes] = wait_for("👀 on the pull request", e2e.sim.reactions, interval=0.01)
    # The simulator stamps each request with the host's monotonic clock, as this test does.
    # Acknowledged at once (milliseconds here); 10 s is a bound no loaded machine reaches.
    assert eyes["monotonic"] - sent < 10.0, f"👀 took {eyes['monotonic'] - sent:.3f} s"
    assert '"eyes"' in eyes["body"]

    [review] = wait_for("the review", e2e.sim.reviews, alive=serve.alive, on_timeout=serve.text)
    assert review["commit_id"] == head
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    assert review["user"]["login"] == "pr-reviewer[bot]"
    assert review["state"] == "COMMENTED"

    # Recorded: the run published, the ledger charged what the engine reported.
    wait_for("the publication to be recorded", lambda: e2e.db(
        "SELECT publish_outcome, comment_id FROM runs WHERE dedupe_key = ?", key) == [
            ("published", review["id"])])
    assert e2e.db("SELECT stop_reason, used_tokens FROM ledger WHERE dedupe_key = ?",
                  key) == [("completed", RUN_TOKENS)]
    assert e2e.db("SELECT status FROM queue") == [("done",)]
    assert e2e.scenario is not None and e2e.scenario.calls == 1

    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0

    # The log: one JSON object per line, each carrying its context.
    text = serve.text()
    lines = serve.lines()
    assert len(lines) == len(text.splitlines())
    [delivery] = serve.messages("webhook delivery")
    assert (delivery["delivery_id"], delivery["repo"], delivery["pr"]) == (
        "e2e-opened-1", REPO, PR)
    [recorded] = serve.messages("run recorded")
    assert recorded["dedupe_key"] == key and recorded["attempt"] == 1
    assert recorded["owner"].endswith((":0", ":1")) and recorded["repo"] == REPO
    # No secret in any line: the webhook secret, the App's key, any token or JWT.
    e2e.assert_no_secrets()


def test_log_format_text_is_one_readable_line_per_record(e2e: E2E) -> None:
    serve = e2e.serve(log_format="text")
    serve.wait_ready(polled=False)
    ping = serve.post_webhook("ping", {"zen": "Design for failure.", "hook_id": 7},
                              delivery_id="e2e-ping-1")
    assert ping.status_code == 200 and ping.json()["ping"] is True
    serve.signal(signal.SIGINT)
    assert serve.wait(timeout=20) == 0

    text = serve.text()
    assert serve.lines() == []  # not JSON
    shape = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 "
                       r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) +[\w.]+: \S")
    lines = text.splitlines()
    assert lines and all(shape.match(line) for line in lines), text
    [delivery] = [line for line in lines if "webhook delivery" in line]
    assert "delivery_id=e2e-ping-1" in delivery and "outcome=ping" in delivery
    assert any("service.app.shutdown: shutting down" in line and "signal=SIGINT" in line
               for line in lines)
    e2e.assert_no_secrets()
