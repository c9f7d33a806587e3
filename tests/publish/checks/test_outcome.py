"""Every way a trigger ends, its check run's words against the ledger.

Each scenario ends a trigger through the real code that ends it (the publisher, the
worker's settle-at-zero, the check-run loop), then reads what its check run says beside
what the ledger charged the trigger (every attempt: settled at its use, lost at its
reservation). The rule pinned: the tokens a check run names add up to exactly the
ledger's charge, and "Nothing was charged" appears exactly when the charge is zero. The
title says what happened (a review that ran is never called "not reviewed").
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial

import pytest

from service.budget.usage import Usage
from service.engine.base import Description
from service.model.jobs import Job
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.run_content import Omitted
from service.review.settle import NOTHING_SPENT
from service.storage import checks, ledger, queue_lease
from service.storage.queue import Claim
from tests.publisher_rig import (
    ANCHORED,
    HEAD,
    NEW_HEAD,
    OWNER,
    PHRASE,
    REPO,
    Rig,
    budget,
    publisher_rig,
)

__all__ = ["publisher_rig"]

pytestmark = pytest.mark.anyio

RIG_BUDGET = budget(run=10_000)
USED = Usage(4321, "exact", "claude_code", "m", cost_usd=0.05)
_STATED = re.compile(r"(?:\*\*Cost:\*\* |charged )(\d[\d ]*) tokens?")


def stated(summary: str) -> int:
    """The tokens a summary says the trigger was charged, added up."""
    return sum(int(m.replace(" ", "")) for m in _STATED.findall(summary))


def charged(rig: Rig, key: str) -> int:
    with rig.store.read() as tx:
        return ledger.charged(tx, key)


def shown(rig: Rig, key: str) -> checks.CheckState:
    with rig.store.read() as tx:
        rows = checks.rows(tx, key)
    completed = [r.state for r in rows if r.state.status == checks.COMPLETED]
    assert completed, f"{key} has no completed check run: {rows}"
    return completed[-1]


def assert_true_to_the_ledger(rig: Rig, key: str) -> checks.CheckState:
    state = shown(rig, key)
    total = charged(rig, key)
    assert stated(state.summary) == total, (total, state.summary)
    assert ("Nothing was charged" in state.summary) == (total == 0), (total, state.summary)
    return state


def lose_a_first_attempt(rig: Rig, job: Job) -> Claim:
    """The first attempt's worker dies holding the lease; the next claim closes its
    reservation as lost (charged in full) and takes the trigger again."""
    assert rig.queue.enqueue(job, now=rig.now())
    first = rig.queue.claim(now=rig.now(), owner="dead-host", admit=rig.governor.admit)
    assert first is not None
    rig.advance(seconds=rig.queue.lease.total_seconds() + 1)
    again = rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit,
                            lapsed=rig.governor.close_lapsed)
    assert again is not None and again.dedupe_key == job.dedupe_key
    return again


def start(rig: Rig, claim: Claim, head: str = HEAD) -> None:
    marks = CheckMarks(lambda: rig.checks)
    with rig.store.transaction() as tx:
        marks.start(tx, marks.target(claim.dedupe_key, claim.job.command, REPO,
                                     claim.job.pr_number, head), claim.lease.attempt, rig.now())


def settle_zero(rig: Rig, claim: Claim, stop: str,
                check: Callable[[int], checks.CheckState]) -> None:
    """What the worker's settle-at-zero writes (``SettleStore.settle_zero``)."""
    start(rig, claim)
    marks = CheckMarks(lambda: rig.checks)
    target = marks.target(claim.dedupe_key, claim.job.command, REPO, claim.job.pr_number, HEAD)
    with rig.store.transaction() as tx:
        assert rig.governor.settle(claim, NOTHING_SPENT, now=rig.now(), stop_reason=stop,
                                   conn=tx)
        assert queue_lease.finish(tx, claim.dedupe_key, claim.lease.owner)
        marks.end(tx, target, check(ledger.charged(tx, claim.dedupe_key)), rig.now())


@dataclass(frozen=True)
class Ending:
    name: str
    run: Callable[[Rig, bool], Awaitable[str]]  # (rig, an earlier attempt lost) -> key
    title: str


async def published(rig: Rig, lost: bool) -> str:
    pr = rig.add_pull()
    job = rig.opened(pr)
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, findings=(ANCHORED,), usage=USED)
    assert (await rig.publisher().publish_key(job.dedupe_key)).status == "published"
    return job.dedupe_key


async def reviewed_then_superseded(rig: Rig, lost: bool) -> str:
    pr = rig.add_pull()
    job = rig.opened(pr)
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, findings=(ANCHORED,), usage=USED)
    rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=pr.head.diff)
    assert (await rig.publisher().publish_key(job.dedupe_key)).status == "superseded"
    return job.dedupe_key


async def mention_on_a_moved_head(rig: Rig, lost: bool) -> str:
    pr = rig.add_pull()
    job = rig.ask(pr)
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, findings=(ANCHORED,), usage=USED)
    rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=pr.head.diff)
    assert (await rig.publisher().publish_key(job.dedupe_key)).status == "superseded"
    return job.dedupe_key


async def described(rig: Rig, lost: bool) -> str:
    pr = rig.add_pull()
    job = rig.ask(pr, command="describe")
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, usage=USED,
                 description=Description("Add logging", "Logs requests.", ("adds a logger",)))
    assert (await rig.publisher().publish_key(job.dedupe_key)).status == "published"
    return job.dedupe_key


async def dry_run(rig: Rig, lost: bool) -> str:
    rig.set_config(dry_run=True)
    pr = rig.add_pull()
    job = rig.opened(pr)
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, findings=(ANCHORED,), usage=USED)
    assert (await rig.publisher().publish_key(job.dedupe_key)).status == "dry_run"
    return job.dedupe_key


async def engine_failed(rig: Rig, lost: bool) -> str:
    pr = rig.add_pull()
    job = rig.opened(pr)
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, outcome="failed", stop_reason="engine_error", usage=USED)
    assert (await rig.publisher().publish_key(job.dedupe_key)).status == "refused"
    return job.dedupe_key


async def nothing_to_review(rig: Rig, lost: bool) -> str:
    pr = rig.add_pull()
    job = rig.opened(pr)
    claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
    rig.complete(claim, omitted=(Omitted("yarn.lock", "excluded", 900, "*.lock"),),
                 usage=NOTHING_SPENT)
    await rig.publisher().publish_key(job.dedupe_key)
    return job.dedupe_key


def _zero(check: Callable[[Rig, Claim], Callable[[int], checks.CheckState]], stop: str
          ) -> Callable[[Rig, bool], Awaitable[str]]:
    async def run(rig: Rig, lost: bool) -> str:
        pr = rig.add_pull()
        job = rig.opened(pr)
        claim = lose_a_first_attempt(rig, job) if lost else rig.claim(job)
        settle_zero(rig, claim, stop, check(rig, claim))
        return job.dedupe_key
    return run


async def ended_by_the_queue(rig: Rig, lost: bool, how: str) -> str:
    """Superseded, cancelled or abandoned while pending: the check-run loop ends it."""
    pr = rig.add_pull()
    job = rig.opened(pr)
    if lost:
        claim = lose_a_first_attempt(rig, job)
        assert rig.governor.settle(claim, Usage(700, "exact", "claude_code", "m"),
                                   now=rig.now(), stop_reason="infrastructure")
        assert rig.queue.release(claim.dedupe_key, OWNER)
    else:
        rig.queue.enqueue(job, now=rig.now())
    loop = rig.check_runs()
    await loop.sync(rig.now())
    if how == "superseded":
        rig.world.push(REPO, pr.number, head_sha=NEW_HEAD, diff=pr.head.diff)
        rig.queue.enqueue(rig.opened(pr, NEW_HEAD), now=rig.now())
    elif how == "cancelled":
        rig.queue.cancel_pull_request(REPO, pr.number)
    else:
        with rig.store.transaction() as tx:
            tx.execute("UPDATE queue SET status = 'abandoned', attempts = 3"
                       " WHERE dedupe_key = ?", (job.dedupe_key,))
    await loop.sync(rig.now())
    return job.dedupe_key


ENDINGS = [
    Ending("published", published, "Reviewed: 1 major"),
    Ending("reviewed then superseded", reviewed_then_superseded,
           f"Reviewed, not posted: superseded by {NEW_HEAD[:7]}"),
    Ending("a mention answered on a moved head", mention_on_a_moved_head,
           "Reviewed: 1 major"),
    Ending("described", described, "Description posted"),
    Ending("dry run", dry_run, "Dry run: nothing posted"),
    Ending("engine failed", engine_failed, "Not reviewed: the engine failed"),
    Ending("nothing to review", nothing_to_review,
           "Not reviewed: nothing left after exclusions"),
    Ending("closed before the review", _zero(
        lambda rig, c: partial(text.closed, False), "closed"),
        "Not reviewed: the pull request was closed"),
    Ending("superseded before the review", _zero(
        lambda rig, c: partial(text.superseded, NEW_HEAD), "refused"),
        "Not reviewed: superseded by a newer head"),
    Ending("refused by the estimate", _zero(
        lambda rig, c: partial(text.refused_estimate, 31_090, 10_000, 1_109, PHRASE),
        "refused"), "Not reviewed: estimated 31 090 tokens, over the 10 000-token limit"),
    Ending("too large", _zero(
        lambda rig, c: partial(text.refused_size, 3, 9_000, 5_000, PHRASE), "refused"),
        "Not reviewed: too large (3 files, each over 5000 lines)"),
    Ending("declined by the repository", _zero(
        lambda rig, c: lambda n: text.declined_by_repository("auto_review: false", PHRASE, n),
        "refused"), "Not reviewed: the repository's config sets auto_review: false"),
    Ending("superseded while queued", partial(ended_by_the_queue, how="superseded"),
           "Not reviewed: superseded by a newer head"),
    Ending("cancelled by a close while queued", partial(ended_by_the_queue, how="cancelled"),
           "Not reviewed: the pull request was closed"),
    Ending("abandoned", partial(ended_by_the_queue, how="abandoned"),
           "Not reviewed: failed after 3 attempts"),
]


@pytest.mark.parametrize("lost", [False, True], ids=["first attempt", "after a lost attempt"])
@pytest.mark.parametrize("ending", ENDINGS, ids=[e.name for e in ENDINGS])
async def test_every_ending_says_what_the_ledger_charged(rig: Rig, ending: Ending,
                                                         lost: bool) -> None:
    key = await ending.run(rig, lost)
    state = assert_true_to_the_ledger(rig, key)
    assert state.title == ending.title
    if lost:  # the lost attempt's whole reservation is part of what the trigger cost
        assert charged(rig, key) >= RIG_BUDGET.max_run_tokens


async def test_a_review_superseded_after_it_ran_names_the_newer_head_and_its_cost(
        rig: Rig) -> None:
    key = await reviewed_then_superseded(rig, False)
    state = shown(rig, key)
    assert state.conclusion == "neutral"
    assert f"`{NEW_HEAD[:7]}`" in state.summary
    assert "4 321 tokens ($0.05)" in state.summary
    assert "Not reviewed" not in state.title and "Nothing was charged" not in state.summary


async def test_a_trigger_waiting_for_budget_after_a_lost_attempt_gives_the_budget_reason(
        rig: Rig) -> None:
    """A host killed mid-claim, then the window shuts: the check run says it waits for
    the window (and when it frees), not for a worker to retry."""
    pr = rig.add_pull()
    job = rig.opened(pr)
    loop = rig.check_runs()
    assert rig.queue.enqueue(job, now=rig.now())
    await loop.sync(rig.now())
    assert rig.queue.claim(now=rig.now(), owner="dead-host", admit=rig.governor.admit)
    # Another trigger spends the session window meanwhile.
    other = rig.add_pull(head=NEW_HEAD)
    rig.record(rig.opened(other, NEW_HEAD), head=NEW_HEAD,
               usage=Usage(RIG_BUDGET.session_tokens, "exact", "claude_code", "m"))
    rig.advance(seconds=rig.queue.lease.total_seconds() + 1)
    assert rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit,
                           lapsed=rig.governor.close_lapsed) is None  # refused: no budget
    await loop.sync(rig.now())
    (run,) = rig.github_check_runs(HEAD)
    assert run.status == "queued"
    assert run.title is not None and run.title.startswith("Waiting for budget")
    assert "Retrying" not in run.title


async def test_a_retry_still_inside_its_delay_says_when_it_runs(rig: Rig) -> None:
    pr = rig.add_pull()
    job = rig.opened(pr)
    loop = rig.check_runs()
    assert rig.queue.enqueue(job, now=rig.now())
    await loop.sync(rig.now())
    claim = rig.queue.claim(now=rig.now(), owner=OWNER, admit=rig.governor.admit)
    assert claim is not None
    assert rig.governor.settle(claim, NOTHING_SPENT, now=rig.now(),
                               stop_reason="infrastructure")
    assert rig.queue.release(claim.dedupe_key, OWNER,
                             not_before=rig.now() + timedelta(minutes=5))
    await loop.sync(rig.now())
    (run,) = rig.github_check_runs(HEAD)
    assert run.title == "Retrying: attempt 1 of 3 did not finish"
