"""``serve`` end to end with no webhook ever sent: the poller alone finds the work."""

from __future__ import annotations

from collections.abc import Callable

from tests.e2e.conftest import E2E
from tests.e2e.harness import PR, REPO
from tests.kit.waiting import wait_for


def test_the_poller_alone_gets_the_review_posted(make_e2e: Callable[..., E2E]) -> None:
    # The pull request exists closed when serve first polls, so the cold start seeds the
    # watermark at it and enqueues nothing; it is then reopened (the simulator's control
    # API cannot open a new pull request, and GitHub's REST API can only reopen one), which
    # moves its updated_at past the mark. Only the poller can see that: the simulator
    # delivers no webhooks unless asked to.
    e2e = make_e2e(pr_state="closed")
    serve = e2e.serve()
    serve.wait_ready(polled=True)
    assert e2e.db("SELECT COUNT(*) FROM queue") == [(0,)]
    assert e2e.sim.reviews() == []

    e2e.sim.reopen()
    head = e2e.sim.seeded.head_sha
    key = f"pr_opened:{REPO}:{PR}:{head}"
    [review] = wait_for("the review", e2e.sim.reviews, alive=serve.alive, on_timeout=serve.text)
    assert review["commit_id"] == head
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    assert e2e.db("SELECT count(*) FROM deliveries") == [(0,)]
    assert e2e.db("SELECT dedupe_key, status FROM queue") == [(key, "done")]
    [enqueued] = [line for line in serve.lines() if line.get("dedupe_key") == key
                  and line["logger"].startswith("service.intake.poller")]
    assert enqueued["repo"] == REPO
