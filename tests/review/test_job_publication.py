"""End to end through the worker: a claimed mention is acknowledged, reviewed by the fake
engine on a real git checkout, recorded, and published by ``GitHubPublisher`` as one
review pinned to the head, with its anchored finding inline."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.publish.retry import republish_pending
from service.review.installations import Installations
from service.review.job import JobRunner
from tests.worker_helpers import REPO, Sim, build_sim, close_sim, github_publisher


@pytest.mark.anyio
async def test_a_mention_is_acknowledged_reviewed_and_published_once(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        pr = sim.open_pr({"src/app.py": "changed 1\n" + "".join(
            f"line {i}\n" for i in range(2, 21))})
        key, comment_id = sim.enqueue_mention(pr)
        runner = JobRunner(
            store=sim.store, leasing=sim.queue.leasing, governor=sim.governor, github=sim.github,
            installations=Installations(sim.store, sim.github), checkouts=sim.checkouts,
            engine=sim.engine, publisher=publisher, clock=sim.world.clock.now,
            config=sim.config, tuning=sim.tuning)

        await runner(sim.claim())

        reactions = sim.world.issue_comments[comment_id].reactions
        assert [r.content for r in reactions] == ["eyes"]
        (review,) = [r for r in sim.world.reviews.values() if r.pull_number == pr.number]
        assert review.user.login == "pr-reviewer[bot]" and review.state == "COMMENTED"
        assert review.commit_id == pr.head.head_sha
        (inline,) = [c for c in sim.world.review_comments.values()
                     if c.review_id == review.id]
        assert (inline.path, inline.line) == ("src/app.py", 1)
        assert "1,234 tokens (exact count)" in review.body and "`fake`" in review.body
        row = sim.run_row(key)
        assert row is not None
        assert (row["publish_outcome"], row["comment_id"]) == ("published", review.id)
        assert sim.status(key) == "done"
        assert await republish_pending(sim.store, publisher, sim.now()) == 0
        assert len([r for r in sim.world.reviews.values() if r.pull_number == pr.number]) == 1
        assert sim.world.pull(REPO, pr.number).head.head_sha == review.commit_id
        # The finding was placed on the diff the worker had read, not on a second fetch.
        assert diff_reads(sim) == []
    finally:
        await close_sim(sim)


def diff_reads(sim: Sim) -> list[str]:
    """The GETs of the pull request's diff (the diff media type or its files)."""
    return [r.path for r in sim.world.requests.matching("GET", f"/repos/{REPO}/pulls/*")
            if r.path.endswith("/files")
            or "diff" in r.headers.get("accept", "")]


@pytest.mark.anyio
async def test_a_retried_publication_fetches_the_diff_it_does_not_have(
        tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        pr = sim.open_pr({"src/app.py": "changed 1\n" + "".join(
            f"line {i}\n" for i in range(2, 21))})
        key, _ = sim.enqueue_mention(pr)
        # The first attempt fails at GitHub: the run stays recorded for the re-offer loop.
        sim.world.faults.add(method="POST", path_glob="*/reviews", status=502, times=1)
        await sim.runner(publisher=publisher)(sim.claim())
        assert diff_reads(sim) == []
        sim.world.clock.advance(600)
        assert await republish_pending(sim.store, publisher, sim.now()) == 1
        (review,) = [r for r in sim.world.reviews.values() if r.pull_number == pr.number]
        (inline,) = [c for c in sim.world.review_comments.values()
                     if c.review_id == review.id]
        assert (inline.path, inline.line) == ("src/app.py", 1)
        assert len(diff_reads(sim)) == 1
        assert sim.run_row(key)["publish_outcome"] == "published"  # type: ignore[index]
    finally:
        await close_sim(sim)
