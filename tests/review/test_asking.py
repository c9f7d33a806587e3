"""An ask's own steps: the question read with its context from the simulated GitHub, and
its one call cut from the run's planned calls."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from service.config.posting import AskConfig
from service.model.jobs import Job
from service.review.asking import THREAD_REPLIES, one_call, read_question
from service.review.calls import CallPlan
from service.review.diff import FileDiff
from service.review.packing import Packing
from service.storage.queue import Claim, Lease
from tests.worker_helpers import REPO, build_sim, close_sim

LEASE = Lease(owner="w", until=datetime(2026, 1, 1, tzinfo=UTC), attempt=1)


def claim_of(job: Job) -> Claim:
    return Claim(job=job, lease=LEASE)


def diff(path: str) -> FileDiff:
    text = f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    return FileDiff(path=path, old_path=None, status="A", text=text)


def test_an_answer_is_the_first_call_and_the_rest_is_listed_unread() -> None:
    planned = CallPlan(Packing(((diff("a.py"),), (diff("b.py"), diff("c.py"))), ()),
                       prices=(100, 120), answer=50, estimate=9_999, fitted=True)
    one = one_call(planned)
    assert [f.path for p in one.packing.parts for f in p] == ["a.py"]
    assert [(o.path, o.reason) for o in one.packing.omitted] == [
        ("b.py", "max_run_tokens"), ("c.py", "max_run_tokens")]
    assert (one.prices, one.estimate, one.fitted) == ((100,), 150, False)
    single = one_call(CallPlan(Packing(((diff("a.py"),),), ()), prices=(100,), answer=50,
                               estimate=9_999, fitted=True))
    # Priced from its prompt: a review's fitted rate says nothing of what an answer costs.
    assert (single.estimate, single.fitted) == (150, False)


@pytest.mark.anyio
async def test_a_question_whose_thread_is_gone_is_answered_in_the_conversation(
        tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        pr = sim.open_pr({"src/app.py": "changed\n"})
        root = sim.world.add_review_comment(REPO, pr.number, user="alice", body="Hm.",
                                            path="src/app.py", line=1)
        replies = [sim.world.reply_to_review_comment(REPO, pr.number, root.id, user="alice",
                                                     body=f"reply {n}")
                   for n in range(THREAD_REPLIES + 2)]
        asking = sim.world.reply_to_review_comment(REPO, pr.number, root.id, user="bob",
                                                   body="@claude ask is it?")
        job = Job(kind="mention", repo=REPO, pr_number=pr.number, actor_id=1,
                  comment_id=asking.id, comment_source="review", command="ask")
        asked = await read_question(sim.github, sim.installation_id, claim_of(job), (),
                                    AskConfig(max_answer_chars=900))
        assert asked is not None and asked.reply_to == root.id
        assert asked.question.max_chars == 900 and asked.question.findings == ()
        # The thread's first comment and its latest replies, oldest first.
        said = [body for _, body in asked.question.thread]
        assert said[0] == "Hm." and said[1:] == [r.body for r in replies[-THREAD_REPLIES:]]

        del sim.world.review_comments[root.id]
        asked = await read_question(sim.github, sim.installation_id, claim_of(job), (),
                                    AskConfig())
        assert asked is not None and asked.reply_to is None and asked.question.thread == ()

        del sim.world.review_comments[asking.id]
        assert await read_question(sim.github, sim.installation_id, claim_of(job), (),
                                   AskConfig()) is None
    finally:
        await close_sim(sim)
