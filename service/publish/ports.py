"""What a job says to the outside world: the 👀 acknowledgement and the publication.

The pool only knows the ``Publisher`` protocol. ``ack`` runs first thing in a job (a
failure is logged, never fatal); ``publish`` runs after the run is recorded and its cost
settled, outside any transaction, so a failed post is retried from the ``runs`` row
without a second review.

- ``GitHubAck`` leaves the 👀 reaction: on the mention's comment (``issue`` comments and
  ``review`` diff comments have different endpoints), or on the pull request itself for
  ``pr_opened``.
- ``NullPublisher`` acknowledges through an optional ``Acknowledger`` and publishes
  nothing: the run stays recorded with ``published_at`` NULL for a publisher to post.
- ``RecordingPublisher`` keeps what it was given, for tests and dry runs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final, Protocol

from service.github.client import GitHubClient
from service.github.names import validate_repo
from service.publish.run import RecordedRun
from service.storage.queue import Claim

log = logging.getLogger(__name__)

EYES: Final = "eyes"


class Acknowledger(Protocol):
    async def ack(self, claim: Claim) -> None:
        """Tell the person (or the pull request) that the work has started."""
        ...


class Publisher(Acknowledger, Protocol):
    async def publish(self, run: RecordedRun) -> None:
        """Post a recorded run. Called after the record is committed, never inside it."""
        ...


def reaction_path(claim: Claim) -> str:
    """Where the 👀 for ``claim`` goes (REST path)."""
    validate_repo(claim.repo)
    base = f"/repos/{claim.repo}"
    if claim.comment_id is None:
        return f"{base}/issues/{claim.pr_number}/reactions"
    if claim.comment_source == "review":
        return f"{base}/pulls/comments/{claim.comment_id}/reactions"
    if claim.comment_source == "issue":
        return f"{base}/issues/comments/{claim.comment_id}/reactions"
    raise ValueError(f"unknown comment_source {claim.comment_source!r}")


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
        installation = await self._installations(claim.repo)
        # Urgent: ahead of the installation's reviews and check runs waiting to be written.
        await self._github.post_json(installation, reaction_path(claim), {"content": EYES},
                                     idempotent=True, urgent=True)


class NullPublisher:
    """Acknowledge through ``acker`` (if any); leave recorded runs for a publisher."""

    def __init__(self, acker: Acknowledger | None = None) -> None:
        self._acker = acker

    async def ack(self, claim: Claim) -> None:
        if self._acker is not None:
            await self._acker.ack(claim)

    async def publish(self, run: RecordedRun) -> None:
        log.info("run recorded; not published by this publisher", extra={
            "dedupe_key": run.dedupe_key, "repo": run.claim.repo, "pr": run.claim.pr_number,
            "outcome": run.outcome})


class RecordingPublisher:
    """Keeps every ack and run it is handed; ``on_publish`` sees each run as it comes."""

    def __init__(self, acker: Acknowledger | None = None,
                 on_publish: Callable[[RecordedRun], Awaitable[None]] | None = None) -> None:
        self._acker = acker
        self._on_publish = on_publish
        self.acks: list[Claim] = []
        self.runs: list[RecordedRun] = []

    async def ack(self, claim: Claim) -> None:
        self.acks.append(claim)
        if self._acker is not None:
            await self._acker.ack(claim)

    async def publish(self, run: RecordedRun) -> None:
        self.runs.append(run)
        if self._on_publish is not None:
            await self._on_publish(run)
