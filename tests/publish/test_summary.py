"""One summary comment per pull request (``service.publish.summary``): written after
every publication, edited in place, found again by its marker after a lost answer, made
again when a person deleted it, never posted twice, nothing in a dry run."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from service.engine.base import Assessment
from service.publish.summary_text import SUMMARY_MARKER
from service.storage import summaries
from service.storage.summaries import Head
from tests.publisher_rig import (  # noqa: F401 - the `rig` fixture
    ANCHORED,
    BOT,
    PHRASE,
    REPO,
    UNANCHORED,
    Rig,
    publisher_rig,
)
from tests.simulator.models import IssueComment

T = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
COMMENTS = f"/repos/{REPO}/issues/*/comments"


def head(**changes: object) -> Head:
    base = Head(kind="pr_opened", command="review", status="done", head_sha="ab" * 20,
                outcome="completed", publish_outcome="published", stop_reason="completed",
                enqueued_at=T, posted=2)
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_the_store_counts_settled_usage_and_open_reservations_apart(rig: Rig) -> None:
    """Two settled runs and one in flight: the facts the comment is written from."""
    from service.budget.usage import Usage
    first, second, third = rig.add_pull(), rig.add_pull(), rig.add_pull()
    for pr in (first, second):
        rig.record(rig.opened(pr), usage=Usage(24_800, "exact", "claude_code", "m"))
    with rig.store.transaction() as tx:  # both on one pull request, as the summary sees it
        tx.execute("UPDATE ledger SET pr_number = ?", (first.number,))
    rig.claim(rig.opened(third))  # admitted: its reservation is open
    with rig.store.transaction() as tx:
        tx.execute("UPDATE ledger SET pr_number = ?", (first.number,))
    with rig.store.read() as tx:
        facts = summaries.facts(tx, REPO, first.number)
    assert (facts.tokens, facts.runs) == (49_600, 2)
    assert (facts.in_progress, facts.reserved) == (1, rig.governor.config.max_run_tokens)


# -- through the simulator ------------------------------------------------------------------


def _summary_comments(rig: Rig, number: int) -> list[IssueComment]:
    return [c for c in rig.world.issue_comments.values()
            if c.issue_number == number and c.user.login == BOT
            and c.body.startswith(SUMMARY_MARKER)]


@pytest.mark.anyio
async def test_five_reviews_leave_one_summary_edited_in_place(rig: Rig) -> None:
    pr = rig.add_pull()
    publisher = rig.publisher(summary_comments=True)
    heads = [f"{n}e" * 20 for n in range(1, 6)]
    for n, sha in enumerate(heads):
        rig.world.push(REPO, pr.number, head_sha=sha, diff=pr.head.diff)
        finding = replace(ANCHORED if n % 2 else UNANCHORED, fingerprint=f"{n}" * 32)
        run = rig.record(rig.opened(pr, head=sha), findings=(finding,), head=sha,
                         assessment=Assessment(f"Review number {n + 1}.", "low"))
        assert (await publisher.publish_key(run.dedupe_key)).status == "published"
        rig.advance(minutes=1)
    (summary,) = _summary_comments(rig, pr.number)
    for sha in heads:
        assert f"`{sha[:7]}`" in summary.body
    assert summary.body.count("1 new finding(s)") == 5
    assert "Review number 5." in summary.body and "Review number 4." not in summary.body
    assert "**Open findings:** 2 major · 3 minor" in summary.body
    assert "21,605 tokens over 5 run(s)" in summary.body
    row = rig.row("pr_summaries", "pr_number = ?", pr.number)
    assert (row["comment_id"], row["version"], row["shown_version"]) == (summary.id, 5, 5)
    assert row["lease_until"] is None


@pytest.mark.anyio
async def test_a_create_whose_answer_was_lost_is_found_by_its_marker(rig: Rig) -> None:
    pr = rig.add_pull()
    publisher = rig.publisher(summary_comments=True)
    # GitHub makes the comment, and the answer never arrives.
    rig.world.faults.add(method="POST", path_glob=COMMENTS, drop="read_error", applied=True)
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    assert (await publisher.publish_key(run.dedupe_key)).status == "published"
    assert len(_summary_comments(rig, pr.number)) == 1  # made, but not known to be
    row = rig.row("pr_summaries", "pr_number = ?", pr.number)
    assert row["comment_id"] is None and row["create_started_at"] is not None
    assert (row["version"], row["shown_version"]) == (1, 0)
    # The maintenance loop finds the comment by its marker and edits it.
    assert await publisher.summaries.update_pending(rig.now()) == 1  # type: ignore[union-attr]
    (summary,) = _summary_comments(rig, pr.number)
    row = rig.row("pr_summaries", "pr_number = ?", pr.number)
    assert (row["comment_id"], row["shown_version"]) == (summary.id, 1)
    assert summary.updated_at is not None
    assert await publisher.summaries.update_pending(rig.now()) == 0  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_deleted_summary_is_made_again_and_a_5xx_retried(rig: Rig) -> None:
    pr = rig.add_pull()
    publisher = rig.publisher(summary_comments=True)
    first = rig.record(rig.ask(pr), findings=(ANCHORED,))
    await publisher.publish_key(first.dedupe_key)
    (old,) = _summary_comments(rig, pr.number)
    del rig.world.issue_comments[old.id]  # a person deleted it
    rig.world.faults.server_error(method="POST", path_glob=COMMENTS, status=502)
    second = rig.record(rig.ask(pr), findings=(UNANCHORED,))
    assert (await publisher.publish_key(second.dedupe_key)).status == "published"
    assert _summary_comments(rig, pr.number) == []  # the create met a 502: not made
    assert await publisher.summaries.update_pending(rig.now()) == 1  # type: ignore[union-attr]
    (new,) = _summary_comments(rig, pr.number)
    assert new.id != old.id and "2 run(s)" in new.body


@pytest.mark.anyio
async def test_nothing_is_written_in_a_dry_run_or_when_turned_off(rig: Rig) -> None:
    pr = rig.add_pull()
    publisher = rig.publisher(summary_comments=True)
    rig.set_config(dry_run=True)
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    assert (await publisher.publish_key(run.dedupe_key)).status == "dry_run"
    rig.set_config(dry_run=False, summary_comment=False)
    run = rig.record(rig.ask(pr), findings=(UNANCHORED,))
    assert (await publisher.publish_key(run.dedupe_key)).status == "published"
    assert _summary_comments(rig, pr.number) == []
    assert rig.rows("pr_summaries") == []


@pytest.mark.anyio
async def test_a_request_while_the_summary_is_written_is_written_by_the_holder(
        rig: Rig) -> None:
    """The holder lets go only when nothing was asked meanwhile (one guarded UPDATE)."""
    now = rig.now()
    with rig.store.transaction() as tx:
        summaries.request(tx, REPO, 7, now)
        got = summaries.lease(tx, REPO, 7, now, now + timedelta(minutes=5))
    assert got is not None and (got.version, got.shown_version) == (1, 0)
    with rig.store.transaction() as tx:  # another process asks, and cannot take it
        summaries.request(tx, REPO, 7, now)
        assert summaries.lease(tx, REPO, 7, now, now + timedelta(minutes=5)) is None
        assert summaries.pending(tx, now, 10) == []  # leased: nobody else offers it
    with rig.store.transaction() as tx:
        assert summaries.finish(tx, REPO, 7, 99, got.version) == 2  # keep the lease
    with rig.store.transaction() as tx:
        assert summaries.finish(tx, REPO, 7, 99, 2) is None  # let go
        assert summaries.lease(tx, REPO, 7, now, now + timedelta(minutes=5)) is not None


@pytest.mark.anyio
async def test_a_refused_summary_leaves_the_review_posted(rig: Rig) -> None:
    pr = rig.add_pull()
    publisher = rig.publisher(summary_comments=True)
    rig.world.faults.add(method="POST", path_glob=COMMENTS, status=403,
                         body={"message": "Resource not accessible by integration"})
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    assert (await publisher.publish_key(run.dedupe_key)).status == "published"
    assert _summary_comments(rig, pr.number) == []
    row = rig.row("pr_summaries", "pr_number = ?", pr.number)
    assert row["shown_version"] == row["version"] and row["lease_until"] is None
    assert await publisher.summaries.update_pending(rig.now()) == 0  # type: ignore[union-attr]
