"""How a job ends in the store: each ending is one short transaction on a worker thread.

``Settlement`` is the job's only way to the store. Every method is one transaction (or
one read), run on a worker thread (``Database.run``) so that the event loop never waits on SQLite's
write lock and no transaction is ever open across a GitHub, git or engine call:

- ``settle_zero``: nothing ran — settle at zero with a stop reason, finish the row (and,
  for a superseded head, enqueue the current one) together;
- ``commit``: settle with the engine's usage, write the ``runs`` row and finish the row
  together, before anything is published;
- ``give_back``: something broke — settle as ``infrastructure`` and release the row;
- ``defer_for_plan``: the plan's usage limit stopped the run — settle, trip the breaker and
  hand the row back until the reset with its attempt uncounted.

Each ending without an engine also writes what the trigger's check run should show
(``CheckMarks``) in the same transaction, and ``started`` marks it in progress once the job
knows the head it reviews. A recorded run stays in progress until the publisher ends it
(every state is a paced write to GitHub, so none is spent on "posting"); a wait (a retry,
a plan limit) is worded by the check-run loop from the store.

A settle that finds no open reservation of this owner (the lease lapsed and another claim
closed it as ``lost``) writes nothing, and the caller drops its result.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Final

from service.budget.breaker import read_breaker
from service.budget.governor import Governor
from service.budget.usage import Usage
from service.model.jobs import Job
from service.publish.checks.marks import CheckMarks
from service.publish.run import RecordedRun, record_run
from service.storage import ledger, queue_lease
from service.storage.checks import CheckState
from service.storage.database import Database, Transaction
from service.storage.queue import Claim
from service.storage.queue_enqueue import enqueue as enqueue_job
from service.storage.queue_lease import Leasing

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: How long a row waits after a usage limit when neither the engine nor the breaker says
#: until when (the breaker records a trip of its own length, so this is a fallback).
PLAN_WAIT: Final = timedelta(minutes=30)

#: Settling at zero: nothing ran, nothing was spent.
NOTHING_SPENT: Final = Usage(tokens=0, confidence="exact", engine=None, model=None)


def log_extra(claim: Claim) -> dict[str, object]:
    """The context every log line of a job carries."""
    return {"repo": claim.job.repo, "pr": claim.job.pr_number,
            "dedupe_key": claim.dedupe_key, "attempt": claim.lease.attempt,
            "owner": claim.lease.owner}


class Settlement:
    """The store side of a job (see the module docstring)."""

    def __init__(self, store: Database, leasing: Leasing, governor: Governor,
                 clock: Clock, marks: CheckMarks) -> None:
        self._store = store
        self._leasing = leasing
        self._governor = governor
        self._clock = clock
        self._marks = marks

    async def started(self, claim: Claim, head_sha: str) -> None:
        """The job reviews ``head_sha``: its check run shows it in progress."""
        now = self._clock()
        target = self._marks.target(claim.dedupe_key, claim.job.command, claim.job.repo,
                                    claim.job.pr_number, head_sha)

        def work() -> None:
            with self._store.transaction() as conn:
                self._marks.start(conn, target, claim.lease.attempt, now)
        if self._marks.applies(claim.job.command):
            await self._store.run(work)

    async def renew(self, claim: Claim) -> bool:
        """Extend the claim's lease to ``now + lease``; False when it is no longer ours."""
        until = self._clock() + self._leasing.lease
        return await self._store.write_async(
            lambda tx: queue_lease.renew(tx, claim.dedupe_key, claim.lease.owner,
                                         until=until), concurrent=True)

    async def settle_zero(self, claim: Claim, stop_reason: str, *, head_sha: str,
                          check: Callable[[int], CheckState],
                          enqueue: Job | None = None) -> bool:
        """Settle at zero, finish the row, end the trigger's check run on ``head_sha`` (and
        any other open one) with ``check(charged)``, enqueue ``enqueue``: together or not at
        all. ``charged`` is what the trigger's attempts were charged, read in the same
        transaction (an earlier attempt that did not finish was charged its reservation),
        so the check run never says nothing was charged when something was."""
        now = self._clock()
        target = self._marks.target(claim.dedupe_key, claim.job.command, claim.job.repo,
                                    claim.job.pr_number, head_sha)

        def work() -> bool:
            with self._store.transaction() as conn:
                if not self._governor.settle(claim, NOTHING_SPENT, now=now,
                                             stop_reason=stop_reason, conn=conn):
                    return False
                self._finish(conn, claim)
                if self._marks.applies(claim.job.command):
                    self._marks.end(conn, target, check(ledger.charged(conn, claim.dedupe_key)),
                                    now)
                if enqueue is not None:
                    enqueue_job(conn, enqueue, now=now)
                return True
        return await self._store.run(work)

    async def commit(self, run: RecordedRun, *, reviewed_lines: int | None,
                     estimated_tokens: int | None = None) -> bool:
        """Settle, record and finish in ONE transaction; False (nothing written) when the
        reservation is no longer this worker's."""
        claim, now = run.claim, self._clock()

        def work() -> bool:
            with self._store.transaction() as conn:
                if not self._governor.settle(
                        claim, run.usage, now=now, stop_reason=run.stop_reason,
                        reviewed_lines=reviewed_lines, reviewed_since=run.reviewed_since,
                        resets_at=run.resets_at if run.stop_reason == "usage_limit" else None,
                        estimated_tokens=estimated_tokens, conn=conn):
                    return False
                record_run(conn, run)
                self._finish(conn, claim)
                return True
        committed = await self._store.run(work)
        if not committed:
            log.warning("lease lost before settling: the result is discarded, not recorded",
                        extra=log_extra(claim))
        return committed

    async def give_back(self, claim: Claim, usage: Usage, *,
                        retry_in: timedelta | None = None,
                        stop_reason: str = "infrastructure") -> bool | None:
        """Settle as ``stop_reason`` (``infrastructure``, or ``engine_unavailable`` for an
        engine that could not start) with ``usage``, then release the row for another
        attempt, not claimable for ``retry_in`` (None: at once). True: released; False:
        the lease was no longer ours (nothing changed); None: the store failed (the lease
        will lapse and the next claim closes the reservation as ``lost``)."""
        now = self._clock()
        not_before = None if retry_in is None else now + retry_in
        extra = log_extra(claim)
        try:
            settled = await self._store.run(lambda: self._governor.settle(
                claim, usage, now=now, stop_reason=stop_reason))
            if not settled:
                return False
            released: bool = await self._store.write_async(
                lambda tx: queue_lease.release(tx, claim.dedupe_key, claim.lease.owner,
                                               not_before=not_before),
                concurrent=True)
        except Exception:
            log.exception("could not settle the failed job; its lease will lapse and the "
                          "next claim closes the reservation as lost", extra=extra)
            return None
        log.warning("failed job settled as %s (%s tokens) and %s", stop_reason, usage.tokens,
                    ("released for another attempt" + (
                        f" in {retry_in.total_seconds():.0f} s" if retry_in else ""))
                    if released else "left to its new owner",
                    extra={**extra, "retry_at": None if not_before is None or not released
                           else not_before.isoformat()})
        return released

    async def defer_for_plan(self, claim: Claim, usage: Usage,
                             resets_at: datetime | None) -> bool:
        """The plan's usage limit stopped the run: settle what it spent as ``usage_limit``
        (which trips the breaker), and hand the row back, its attempt uncounted, until the
        reset — the engine's word, else the breaker's trip, else ``PLAN_WAIT`` — so it runs
        again by itself. False (nothing written) when the reservation is no longer ours."""
        now = self._clock()

        def work() -> datetime | None:
            with self._store.transaction() as conn:
                if not self._governor.settle(claim, usage, now=now, stop_reason="usage_limit",
                                             resets_at=resets_at, conn=conn):
                    return None
                until = (max(resets_at, now) if resets_at is not None
                         else read_breaker(conn).tripped_until or now + PLAN_WAIT)
                queue_lease.defer(conn, claim.dedupe_key, claim.lease.owner, until=until)
                return until
        until = await self._store.run(work)
        if until is not None:
            log.warning("the plan's usage limit stopped the run; it waits until %s and runs "
                        "again then (the attempt is not counted)", until.isoformat(),
                        extra=log_extra(claim))
        return until is not None

    def _finish(self, conn: Transaction, claim: Claim,
                extra: Mapping[str, object] | None = None) -> None:
        if not queue_lease.finish(conn, claim.dedupe_key, claim.lease.owner):
            # The reservation was still ours, so the row can only have been abandoned
            # under us (it ran out of attempts); the settled cost and the run stand.
            log.warning("the queue row was no longer ours to finish",
                        extra=dict(extra or log_extra(claim)))
