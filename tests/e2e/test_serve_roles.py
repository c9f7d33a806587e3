"""``serve --role web|poller|worker``: three processes on one host, one store file."""

from __future__ import annotations

import signal

from tests.e2e.conftest import E2E
from tests.e2e.harness import PR, REPO
from tests.kit.waiting import wait_for

NOT_RUNNING = "not running in this process"


def test_web_poller_and_worker_roles_share_one_store(e2e: E2E) -> None:
    e2e.configure()
    workers = e2e.serve(role="worker")
    wait_for("the worker process to start", lambda: list(workers.messages("workers started")),
             alive=workers.alive, on_timeout=workers.text)
    poller = e2e.serve(role="poller")
    web = e2e.serve(role="web")
    health = web.wait_ready(polled=False)
    assert health["checks"]["poller"] == {"status": NOT_RUNNING}
    assert health["checks"]["workers"] == {"status": NOT_RUNNING}
    wait_for("the poller process's first cycle", lambda: list(poller.messages(
        "seeded a watermark")), alive=poller.alive, on_timeout=poller.text)

    key = f"pr_opened:{REPO}:{PR}:{e2e.sim.seeded.head_sha}"
    response = web.post_webhook("pull_request", e2e.sim.pull_request_payload("opened"),
                                delivery_id="e2e-roles-1")
    assert response.status_code == 202 and response.json()["enqueued"] == [key]
    # No signal crosses processes: the worker process finds the row at its next claim.
    [review] = wait_for("the review", e2e.sim.reviews, alive=workers.alive, on_timeout=workers.text)
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    assert [line["message"] for line in web.messages("run recorded")] == []
    [recorded] = workers.messages("run recorded")
    assert recorded["dedupe_key"] == key and str(workers.pid) in recorded["owner"]
    assert list(workers.messages("webhook delivery")) == []

    for process in (web, poller, workers):
        process.signal(signal.SIGTERM)
    assert [p.wait(timeout=20) for p in (web, poller, workers)] == [0, 0, 0]
    assert len(e2e.sim.reviews()) == 1
    e2e.assert_no_secrets()
