"""A run's calls fitted before it starts: a review over its reservation is refused at no
cost (its check run says so); a question that cannot fit one call is never refused
silently, but recorded unanswered so the person who asked is told why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.worker_helpers import REPO, build_sim, close_sim, github_publisher


@pytest.mark.anyio
async def test_a_question_that_fits_no_call_is_answered_with_why(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        sim.engine.window = 260  # room for the prompt and the answer, not for the diff
        pr = sim.open_pr({"src/app.py": "changed 1\n" + "x" * 400 + "\n"})
        key, comment_id = sim.enqueue_mention(pr, command="ask", body="@claude ask why?")
        await sim.runner(publisher=github_publisher(sim))(sim.claim())

        assert sim.engine.requests == []  # nothing was sent
        [row] = sim.ledger(key)
        assert (row["stop_reason"], row["used_tokens"]) == ("refused", 0)
        run = sim.run_row(key)
        assert run is not None and (run["outcome"], run["publish_outcome"]) == (
            "failed", "refused")
        (reply,) = [c for c in sim.world.issue_comments.values()
                    if c.issue_number == pr.number and c.user.login == "pr-reviewer[bot]"]
        assert "@bob, I could not finish the answer" in reply.body
        assert "no changed file was read" in reply.body and "over_window" not in reply.body
        assert comment_id != reply.id
    finally:
        await close_sim(sim)


@pytest.mark.anyio
async def test_a_review_over_its_reservation_is_refused_with_nothing_spent(
        tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        pr = sim.open_pr({"src/app.py": "".join(f"changed {i}\n" for i in range(20_000))})
        key = sim.enqueue_opened(pr)
        await sim.runner(config=sim.configured(review={"max_diff_lines": 100_000}))(
            sim.claim())
        assert sim.engine.requests == [] and sim.run_row(key) is None
        [row] = sim.ledger(key)
        assert (row["stop_reason"], row["used_tokens"]) == ("refused", 0)
        with sim.store.read() as tx:
            [(summary,)] = tx.execute("SELECT summary FROM checks WHERE dedupe_key = ?",
                                      (key,)).fetchall()
        assert "estimated" in summary and REPO not in summary
    finally:
        await close_sim(sim)
