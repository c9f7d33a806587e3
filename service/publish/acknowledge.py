"""The 👀 as soon as work is queued, without waiting for a free worker.

A job acknowledges its trigger when a worker claims it. With every worker busy on a
review (minutes each, with a real engine), a request made meanwhile would wait that long
for its 👀; the reaction benchmark measured seconds even with the fake engine's half-second
reviews. ``EarlyAck`` leaves the 👀 on every trigger queued recently, as soon as it is
queued: whatever enqueues work in this process (the webhook receiver, the poller) wakes it
as it wakes the workers, and it also looks every ``interval`` seconds, for work another
process queued.

- Only rows still ``pending``, queued since this process started and within ``recent``,
  are acknowledged. A restart does not acknowledge again what the process before it did:
  each 👀 is a write, and one installation's writes are paced a second apart, so a
  restart re-acknowledging a backlog would hold up the reviews waiting to be posted (the
  chaos run measured that). A row queued just before a restart gets its 👀 from its job.
- Acknowledgements of different installations go out together; the client paces each
  installation's writes (one a second), so one busy installation does not hold up
  another.
- One 👀 per trigger: whichever of this loop and the job comes first posts it
  (``take``), the other skips it (``SkipAcked`` wraps the job's publisher); one that
  failed here is left to the job, which tries once more.
- ``publish.dry_run`` applies: the acknowledger is the publisher's ``ack``, which posts
  nothing in a dry run.

``GitHubAck`` is the 👀 itself: the reaction on the mention's comment (``issue`` comments
and ``review`` diff comments have different endpoints), or on the pull request for
``pr_opened``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, defaultdict
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final

import anyio

from service.github.client import GitHubClient
from service.github.names import validate_repo
from service.publish.ports import Acknowledger, Publisher
from service.publish.run import RecordedRun
from service.runtime.nap import Nap
from service.storage.database import Database
from service.storage.queue import Claim, as_candidate, recent_pending

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

RECENT: Final = timedelta(minutes=10)
INTERVAL: Final = 2.0
REMEMBERED: Final = 10_000
EYES: Final = "eyes"


def reaction_path(claim: Claim) -> str:
    """Where the 👀 for ``claim`` goes (REST path)."""
    validate_repo(claim.job.repo)
    base = f"/repos/{claim.job.repo}"
    if claim.job.comment_id is None:
        return f"{base}/issues/{claim.job.pr_number}/reactions"
    if claim.job.comment_source == "review":
        return f"{base}/pulls/comments/{claim.job.comment_id}/reactions"
    if claim.job.comment_source == "issue":
        return f"{base}/issues/comments/{claim.job.comment_id}/reactions"
    raise ValueError(f"unknown comment_source {claim.job.comment_source!r}")


class GitHubAck:
    """The 👀 reaction, as the installation that covers the repository.

    GitHub answers 200 instead of 201 when the App already reacted, and the request is
    marked idempotent, so a retried attempt acknowledges again harmlessly.
    """

    def __init__(self, github: GitHubClient,
                 installations: Callable[[str], Awaitable[int]]) -> None:
        self._github = github
        self._installations = installations

    async def ack(self, claim: Claim) -> None:
        installation = await self._installations(claim.job.repo)
        # Urgent: ahead of the installation's reviews and check runs waiting to be written.
        await self._github.post_json(installation, reaction_path(claim), {"content": EYES},
                                     idempotent=True, urgent=True)


class EarlyAck:
    """Acknowledges recently queued work at once (module docstring)."""

    def __init__(self, *, store: Database, acker: Acknowledger, clock: Clock,
                 recent: timedelta = RECENT, interval: float = INTERVAL) -> None:
        self._store = store
        self._acker = acker
        self._clock = clock
        self._started = clock()
        self._recent = recent
        self._interval = interval
        # key -> who acknowledges it: "early" (posting or posted here), "job" (the
        # worker is), "failed" (it failed here; the job may try).
        self._owners: OrderedDict[str, str] = OrderedDict()
        self._nap = Nap()

    def acknowledged(self, key: str) -> bool:
        """True when the 👀 for ``key`` is posted (or being posted) here."""
        return self._owners.get(key) == "early"

    def take(self, key: str, *, by: str = "job") -> bool:
        """True when the caller should post the 👀 for ``key``: nobody has yet, or it
        failed here and the caller is the job. Records the caller as its poster. Called
        on the event loop only, so two callers never both get True."""
        owner = self._owners.get(key)
        if owner is not None and not (owner == "failed" and by == "job"):
            return False
        self._remember(key, by)
        return True

    def wake(self) -> None:
        """Look now: new work was queued. Safe from any thread."""
        self._nap.wake()

    async def run(self, stop: asyncio.Event) -> None:
        """Acknowledge until ``stop`` is set: at each wake-up, and every ``interval``."""
        while not stop.is_set():
            self._nap.begin()
            try:
                await self.sweep()
            except Exception:  # a store or GitHub fault: the job still acknowledges
                log.exception("early acknowledgement failed; the workers will acknowledge")
            await self._nap(self._interval, stop)

    async def sweep(self) -> int:
        """Acknowledge every recent pending row not yet seen here; how many were posted."""
        since = max(self._clock() - self._recent, self._started)
        claims = await self._store.run(self._pending, since)
        todo = [c for c in claims if c.dedupe_key not in self._owners]
        if not todo:
            return 0
        by_repo: dict[str, list[Claim]] = defaultdict(list)
        for claim in todo:
            by_repo[claim.job.repo].append(claim)
        posted: list[str] = []
        async with anyio.create_task_group() as tg:
            for group in by_repo.values():
                tg.start_soon(self._ack_all, group, posted)
        return len(posted)

    async def _ack_all(self, claims: list[Claim], posted: list[str]) -> None:
        for claim in claims:
            if not self.take(claim.dedupe_key, by="early"):
                continue  # a worker claimed it meanwhile and acknowledges it itself
            extra = {"repo": claim.job.repo, "pr": claim.job.pr_number,
                     "dedupe_key": claim.dedupe_key}
            try:
                await self._acker.ack(claim)
            except Exception as exc:
                self._remember(claim.dedupe_key, "failed")
                log.warning("early acknowledgement failed (the job will try again): %s",
                            type(exc).__name__, extra={**extra, "error": str(exc)})
                continue
            posted.append(claim.dedupe_key)
            log.info("acknowledged on arrival", extra=extra)

    def _remember(self, key: str, owner: str) -> None:
        self._owners[key] = owner
        self._owners.move_to_end(key)
        while len(self._owners) > REMEMBERED:
            self._owners.popitem(last=False)

    def _pending(self, since: datetime) -> list[Claim]:
        with self._store.read() as tx:
            rows = recent_pending(tx, since)
        # Not a lease: an acknowledgement reads only where to react.
        return [as_candidate(r) for r in rows]


class SkipAcked:
    """A ``Publisher`` whose ``ack`` posts only the 👀 ``early`` has not (``take``)."""

    def __init__(self, publisher: Publisher, early: EarlyAck) -> None:
        self._publisher = publisher
        self._early = early

    async def ack(self, claim: Claim) -> None:
        if self._early.take(claim.dedupe_key):
            await self._publisher.ack(claim)

    async def publish(self, run: RecordedRun) -> None:
        await self._publisher.publish(run)
