"""Polling the repositories one cycle chose for an installation, a few at a time.

Each repository's poll is its own (``RepositoryPoller.poll``: its decisions applied and
its watermarks moved in transactions of its own), so several run at once: a cycle of a
hundred polls takes the time of twenty-five, while ``CONCURRENCY`` stays far below what
GitHub's secondary limits allow for one installation. A ``GitHubError`` fails that
repository alone; a ``RateLimited`` stops the polls not yet started (they wait a cycle)
and is handed back, to hold the installation; any other error stops them too and is
raised as it was, once the polls under way have ended.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

import anyio

from service.github.errors import GitHubError, RateLimited

from .cycle import RepositoryPoller, RepositoryReport
from .planner import Chosen, CyclePlanner

__all__ = ["CONCURRENCY", "Batch", "poll_chosen"]

log = logging.getLogger(__name__)

#: Repositories of one installation polled at once.
CONCURRENCY: Final = 4

BeforePoll = Callable[[int, str, datetime], Awaitable[None]]


@dataclass
class Batch:
    """What the batch did: the reports of the repositories polled, what failed and why,
    the counted requests, and the rate limit that stopped it (if one did)."""

    polled: list[RepositoryReport] = field(default_factory=list)
    failures: dict[str, str] = field(default_factory=dict)
    counted: int = 0
    limited: RateLimited | None = None
    #: What else went wrong (a store fault, a bug): the loop decides what it means.
    error: Exception | None = None


async def poll_chosen(streams: RepositoryPoller, planner: CyclePlanner, installation_id: int,
                      chosen: Chosen, now: datetime, *,
                      before_poll: BeforePoll | None) -> Batch:
    """Poll each of ``chosen``'s repositories as ``installation_id``."""
    batch = Batch()
    gate = anyio.Semaphore(CONCURRENCY)

    async def one(repo: str) -> None:
        async with gate:
            if batch.limited is not None or batch.error is not None:
                return  # rate limited, or the store failed: the rest wait a cycle
            extra = {"installation_id": installation_id, "repo": repo}
            if before_poll is not None:
                # The repository's own config, re-read when stale, before its pull
                # requests are decided: never a reason to skip polling them.
                try:
                    await before_poll(installation_id, repo, now)
                except Exception:
                    log.exception("refreshing the repository's config failed; polling on",
                                  extra=extra)
            try:
                report = await streams.poll(repo, installation_id, now,
                                           seed_floor=chosen.seed_floor)
            except RateLimited as exc:
                batch.failures[repo] = str(exc)
                batch.limited = batch.limited or exc
                return
            except GitHubError as exc:
                batch.failures[repo] = str(exc)
                log.warning("polling a repository failed", extra={**extra, "error": str(exc)})
                return
            except Exception as exc:
                batch.error = batch.error or exc
                return
        batch.polled.append(report)
        batch.counted += report.tally.recurring
        planner.polled(repo, now)

    async with anyio.create_task_group() as tg:
        for target in chosen.targets:
            tg.start_soon(one, target.repo)
    if batch.error is not None:
        raise batch.error  # as it was: the loop tells contention from a fault
    return batch
