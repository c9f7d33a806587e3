"""``serve`` end to end with a question: ``@claude ask`` in the conversation, delivered by
webhook and seen by the poller too, is acknowledged, answered once by the fake ``claude``,
in a comment that quotes it, with no check run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tests.e2e.conftest import E2E
from tests.e2e.harness import PR, REPO
from tests.kit.waiting import wait_for

ANSWERED = "It is read once, at start-up; `reload` re-reads it."


def answer_steps() -> list[dict[str, Any]]:
    text = json.dumps({"answer": ANSWERED})
    return [{"init": {}},
            {"assistant": {"text": text, "usage": {"input_tokens": 10, "output_tokens": 40}}},
            {"result": {"result": text, "total_cost_usd": 0.002}}]


def test_a_question_is_answered_once_where_it_was_asked(e2e: E2E) -> None:
    e2e.configure(answer_steps(), ask={"max_answer_chars": 2_000, "max_run_tokens": 50_000})
    serve = e2e.serve()
    serve.wait_ready(polled=True)

    asked = e2e.sim.client.post("/_simulator/issue-comments", json={
        "repo": REPO, "number": PR, "user": "alice",
        "body": "@claude ask when is the config read?"})
    assert asked.status_code == 201, asked.text
    comment_id = asked.json()["id"]
    key = f"mention:{REPO}:{PR}:{comment_id}"
    hook = {"url": f"{serve.url}/webhook"}
    [sent] = e2e.sim.client.post("/_simulator/webhooks/deliver", json=hook).json()["delivered"]
    assert sent["status"] == 202

    def answers() -> list[dict[str, Any]]:
        listed = e2e.sim.api("GET", f"/repos/{REPO}/issues/{PR}/comments").json()
        return [c for c in listed if c["user"]["login"] == "pr-reviewer[bot]"
                and f"<!-- pr-review-agent:{key} -->" in c["body"]]

    [answer] = wait_for("the answer", answers, alive=serve.alive, on_timeout=serve.text)
    assert "@alice asked:" in answer["body"] and "when is the config read?" in answer["body"]
    assert ANSWERED in answer["body"]
    assert any(f"/issues/comments/{comment_id}/reactions" in r["path"]
               for r in e2e.sim.requests("POST"))
    wait_for("the publication recorded", lambda: e2e.db(
        "SELECT publish_outcome FROM runs WHERE dedupe_key = ?", key) == [("published",)])
    # The poller sees the comment too (1 s interval): still one row, one run, one answer.
    after = datetime.now(UTC)

    def polled_since() -> bool | None:
        body = serve.answers()
        cycle = None if body is None else body["checks"]["poller"].get("last_cycle_at")
        return True if cycle and datetime.fromisoformat(cycle) > after else None
    wait_for("a poll after the answer", polled_since, alive=serve.alive)
    assert e2e.db("SELECT command, status FROM queue WHERE dedupe_key = ?", key) == [
        ("ask", "done")]
    assert e2e.db("SELECT reserved_tokens, stop_reason FROM ledger WHERE dedupe_key = ?",
                  key) == [(50_000, "completed")]
    assert e2e.db("SELECT COUNT(*) FROM checks WHERE dedupe_key = ?", key) == [(0,)]
    assert e2e.scenario is not None and e2e.scenario.calls == 1
    assert len(answers()) == 1
    assert "<question>" in e2e.scenario.call(1)["stdin"]
    e2e.assert_no_secrets()
