"""What a job reads before the engine runs, besides the pull request itself.

The store is read once, when the job starts (``read_known``): the reservation the claim
holds, the head the last completed review saw, the App's findings already posted on the
pull request and the engine's fitted estimator. The rest comes from git and GitHub: the
head and base fetched into the bare cache (``checkout``), where an incremental review
starts (``since``) and the threads of earlier findings (``threads``); the guidelines are
``guidelines``'.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Final

import httpx

from service.config.schema import Config
from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.pulls import PullRequest
from service.github.threads import review_threads
from service.review.checkout import BareRepo, Checkouts
from service.review.estimate import Estimator, load_estimator
from service.review.threads import NO_THREADS, ThreadsView, view
from service.storage import ledger, posted_findings, runs
from service.storage.database import Database, Transaction
from service.storage.posted_findings import Known as PostedFinding
from service.storage.queue import Claim

log = logging.getLogger(__name__)

HEAD_REF: Final = "refs/agent/pull/"
BASE_REF: Final = "refs/agent/base/"


class CheckoutError(RuntimeError):
    """The fetched repository does not hold the commit the pull request names."""


@dataclass(frozen=True)
class Known:
    """What the store knows of the claim and its pull request when the job starts."""

    #: The claim's open reservation; None when the lease was lost before the job began.
    reserved: int | None
    #: The head the last completed review of this pull request saw.
    previous_head: str | None
    #: The App's findings posted inline on this pull request (they have threads).
    posted: tuple[PostedFinding, ...]
    estimator: Estimator


def read_known(tx: Transaction, claim: Claim, engine: str) -> Known:
    """``Known`` for ``claim``, read in one transaction."""
    repo, number = claim.job.repo, claim.job.pr_number
    return Known(reserved=ledger.open_reserved(tx, claim.dedupe_key, claim.lease.owner),
                 previous_head=runs.last_completed_head(tx, repo, number),
                 posted=tuple(posted_findings.inline(tx, repo, number)),
                 estimator=load_estimator(tx, engine))


def refspecs(pull: PullRequest) -> tuple[str, str]:
    """The head (GitHub's ``refs/pull/<n>/head``, which also serves forks) and the base
    branch, into a namespace of the cache's own, named by pull request number (branch
    names can nest, ``release`` and ``release/1.2``; numbers cannot)."""
    return (f"+refs/pull/{pull.number}/head:{HEAD_REF}{pull.number}",
            f"+refs/heads/{pull.base_ref}:{BASE_REF}{pull.number}")


async def checkout(github: GitHubClient, checkouts: Checkouts, *, repo: str,
                   pull: PullRequest, installation: int, extra: dict[str, object]
                   ) -> tuple[BareRepo, PullRequest]:
    """Fetch the head and the base into the bare cache with the installation token.

    The pull request's ``base.sha`` is the base branch's tip as GitHub last computed it;
    when a force-push to the base branch removed it, the tip just fetched is the base
    instead (GitHub would show the same diff against it).
    """
    token = await github.installation_token(installation)
    bare = await checkouts.fetch(repo, pull.clone_url, refspecs(pull), token=token)
    del token
    if not await bare.has_commit(pull.head_sha):
        raise CheckoutError(f"commit {pull.head_sha} is not in the fetched repository")
    if not await bare.has_commit(pull.base_sha):
        tip = await bare.resolve(f"{BASE_REF}{pull.number}")
        log.info("the base sha is gone from the base branch; diffing against its tip",
                 extra={**extra, "base_sha": pull.base_sha, "tip": tip})
        pull = replace(pull, base_sha=tip)
    return bare, pull


async def since(claim: Claim, pull: PullRequest, bare: BareRepo, previous: str | None,
                extra: dict[str, object]) -> str | None:
    """Where an incremental review starts, or None for the whole pull request.

    Only an automatic review of a new head is incremental, from ``previous`` (the head of
    the last completed review); a mention (somebody asked) and a description see it all.
    When that head is no longer in the pull request's history (a force-push), the review
    covers everything again.
    """
    if claim.job.kind != "pr_opened" or claim.job.command != "review":
        return None
    if previous is None or previous == pull.head_sha:
        return None
    if await bare.has_commit(previous) and await bare.is_ancestor(previous, pull.head_sha):
        return previous
    log.info("the last reviewed head is gone from the history (force-push); full review",
             extra={**extra, "previous_head": previous})
    return None


async def threads(github: GitHubClient, store: Database, *, installation: int, claim: Claim,
                  pull: PullRequest, posted: tuple[PostedFinding, ...], config: Config,
                  extra: dict[str, object]) -> ThreadsView:
    """Read the threads of the App's earlier inline findings on this pull request: mark
    the ones people declined, and find the ones whose code changed for the engine to
    re-check (``worker.threads``). GitHub failing here costs the review nothing: it runs
    without, and the next one reads the threads again."""
    if not any(k.state in (posted_findings.OPEN, posted_findings.DECLINED) for k in posted):
        return NO_THREADS
    repo, number = claim.job.repo, claim.job.pr_number
    try:
        found = await review_threads(github, installation, repo, number)
    except (GitHubError, httpx.HTTPError) as exc:
        log.warning("could not read the review threads; reviewing without them: %s",
                    exc, extra=extra)
        return NO_THREADS
    seen = view(found, posted, author=pull.author_login, config=config.triggers,
                phrases=config.review.decline_phrases)
    if seen.declined_now:
        await store.write_async(posted_findings.mark, repo, number,
                                tuple(seen.declined_now), posted_findings.DECLINED)
        log.info("%d finding(s) declined on their threads: %s", len(seen.declined_now),
                 "; ".join(sorted(set(seen.declined_now.values()))), extra=extra)
    return seen
