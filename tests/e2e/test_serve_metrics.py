"""``GET /metrics`` from a real ``serve`` process after one review: every part of the
process counted what it did, and the state series agree with ``/budget``."""

from __future__ import annotations

import signal

from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import E2E
from tests.e2e.harness import INSTALLATION_ID, PR, REPO, RUN_TOKENS
from tests.kit.waiting import wait_for


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and sorted labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_one_review_is_counted_by_every_part_of_the_process(e2e: E2E) -> None:
    serve = e2e.serve()
    serve.wait_ready()
    head = e2e.sim.seeded.head_sha
    key = f"pr_opened:{REPO}:{PR}:{head}"
    response = serve.post_webhook("pull_request", e2e.sim.pull_request_payload("opened"),
                                  delivery_id="metrics-1")
    assert response.json()["enqueued"] == [key]
    wait_for("the publication to be recorded", lambda: e2e.db(
        "SELECT publish_outcome FROM runs WHERE dedupe_key = ?", key) == [("published",)],
        alive=serve.alive, on_timeout=serve.text)

    p = "pr_review_agent"
    published = (f"{p}_publish_attempts_total", (("outcome", "published"),))

    def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
        # The attempt is counted once it returns, a moment after the outcome is recorded.
        scraped = serve.client.get("/metrics")
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain; version=")
        found = samples(scraped.text)
        return found if published in found else None

    found = wait_for("the publication to be counted", scrape)
    assert found[(f"{p}_webhook_deliveries_total", (("outcome", "enqueued"),))] == 1
    assert found[(f"{p}_webhook_seconds_count", ())] == 1
    assert found[(f"{p}_budget_admissions_total", (("rung", "full"),))] == 1
    assert found[(f"{p}_queue_claims_total", (("outcome", "claimed"),))] == 1
    assert found[(f"{p}_engine_runs_total", (("stop_reason", "completed"),))] == 1
    assert found[(f"{p}_engine_run_seconds_count", ())] == 1
    assert found[(f"{p}_engine_tokens_total", ())] == RUN_TOKENS
    assert found[published] == 1
    assert found[(f"{p}_queue_rows", (("kind", "pr_opened"), ("status", "done")))] == 1
    assert found[(f"{p}_queue_rows", (("kind", "pr_opened"), ("status", "pending")))] == 0
    assert found[(f"{p}_store_up", ())] == 1
    assert found[(f"{p}_budget_rung", (("rung", "full"),))] == 1
    installation = str(INSTALLATION_ID)
    assert found[(f"{p}_github_rate_limit_remaining", (("installation", installation),))] > 0
    assert sum(v for (name, _), v in found.items() if name == f"{p}_poll_cycles_total") >= 1

    budget = serve.budget()
    for window in budget["windows"]:
        labels = (("window", window["name"]),)
        assert found[(f"{p}_budget_spent_tokens", labels)] == window["spent"] == RUN_TOKENS
        assert found[(f"{p}_budget_limit_tokens", labels)] == window["limit"]
        assert found[(f"{p}_budget_reserved_tokens", labels)] == window["reserved"] == 0
    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0
