"""The queue as a test drives it: each call one transaction over the storage functions.

Production code calls ``service.storage.queue``, ``queue_enqueue`` and ``queue_lease``
on a transaction it holds; a test mostly wants one step at a time, so this wraps each
function in its own transaction (concurrent where the workers' is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from service.model.jobs import Job
from service.storage import queue, queue_enqueue, queue_lease
from service.storage.database import Database
from service.storage.queue import DEFAULT_LEASE, MAX_ATTEMPTS, Claim, QueueRow
from service.storage.queue_lease import AdmitHook, LapsedHook, Leasing


class QueueDriver:
    """One store's queue, a step per call (see the module docstring)."""

    def __init__(self, store: Database, *, lease: timedelta = DEFAULT_LEASE,
                 max_attempts: int = MAX_ATTEMPTS) -> None:
        self.store = store
        self.leasing = Leasing(lease=lease, max_attempts=max_attempts)

    @property
    def lease(self) -> timedelta:
        return self.leasing.lease

    @property
    def max_attempts(self) -> int:
        return self.leasing.max_attempts

    def enqueue(self, job: Job, *, now: datetime) -> bool:
        with self.store.transaction() as tx:
            return queue_enqueue.enqueue(tx, job, now=now)

    def enqueue_many(self, jobs: Sequence[tuple[Job, datetime]]) -> list[bool]:
        with self.store.transaction() as tx:
            return queue_enqueue.enqueue_many(tx, jobs)

    def cancel_pull_request(self, repo: str, pr_number: int) -> list[str]:
        with self.store.transaction() as tx:
            return queue_enqueue.cancel_pull_request(tx, repo, pr_number)

    def claim(self, *, now: datetime | Callable[[], datetime], owner: str,
              admit: AdmitHook | None = None, lapsed: LapsedHook | None = None
              ) -> Claim | None:
        return queue_lease.claim(self.store, self.leasing, now=now, owner=owner,
                                 admit=admit, lapsed=lapsed)

    def finish(self, dedupe_key: str, owner: str) -> bool:
        with self.store.transaction(concurrent=True) as tx:
            return queue_lease.finish(tx, dedupe_key, owner)

    def release(self, dedupe_key: str, owner: str, *, not_before: datetime | None = None
                ) -> bool:
        with self.store.transaction(concurrent=True) as tx:
            return queue_lease.release(tx, dedupe_key, owner, not_before=not_before)

    def renew(self, dedupe_key: str, owner: str, *, now: datetime) -> bool:
        with self.store.transaction(concurrent=True) as tx:
            return queue_lease.renew(tx, dedupe_key, owner, until=now + self.lease)

    def get(self, dedupe_key: str) -> QueueRow | None:
        with self.store.read() as tx:
            return queue.row(tx, dedupe_key)

    def rows(self, statuses: Sequence[str] | None = None) -> list[QueueRow]:
        with self.store.read() as tx:
            return queue.rows(tx, None if statuses is None else tuple(statuses))

    def counts(self) -> dict[str, int]:
        with self.store.read() as tx:
            return queue.counts(tx)

    def known_heads(self, repo: str, pr_number: int) -> set[str]:
        with self.store.read() as tx:
            return queue.known_heads(tx, repo, pr_number)
