"""What both ingest paths do with a trigger decision, in the caller's transaction.

The webhook receiver and the poller classify the same events with the same rules
(``service.intake.rules``) and must then have the same effect, so that whichever sees an
event first acts on it and the other is a no-op: an ``Enqueue`` is an idempotent insert
on its dedupe key; a ``Close`` cancels the pull request's pending rows and records the
closure for the retention sweep; a ``Decline`` marks the App's open finding it answers
``declined`` and asks for the pull request's summary comment to be brought up to date (a
second sighting finds it declined already and changes nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from service.intake.rules.decisions import Close, Decision, Decline, Enqueue, Ignore
from service.storage import closures, posted_findings, summaries
from service.storage.database import Transaction
from service.storage.queue_enqueue import cancel_pull_request, enqueue_many

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Decided:
    """A decision, and when its event was received (a webhook) or seen (a poll): the
    time the queue rows it asks for are enqueued at."""

    decision: Decision
    at: datetime


@dataclass
class Applied:
    """The effect of one or more decisions: what was enqueued, cancelled, or ignored."""

    enqueued: list[str] = field(default_factory=list)   # new queue rows, by dedupe key
    duplicates: list[str] = field(default_factory=list)  # keys that were already queued
    cancelled: list[str] = field(default_factory=list)   # pending rows of a closed PR
    declined: list[str] = field(default_factory=list)    # fingerprints declined by a reply
    ignored: str | None = None                           # the reason, for one Ignore

    def add(self, more: Applied) -> None:
        """Count ``more`` in as well (the last reason ignored wins)."""
        self.enqueued += more.enqueued
        self.duplicates += more.duplicates
        self.cancelled += more.cancelled
        self.declined += more.declined
        if more.ignored is not None:
            self.ignored = more.ignored


def apply_decisions(
    conn: Transaction, decisions: Sequence[Decided],
) -> list[Applied]:
    """Carry out each decision in order inside ``conn``'s transaction.

    Returns one ``Applied`` per decision.

    Consecutive enqueues go to the queue together (``queue_enqueue.enqueue_many``, a few
    statements for the lot); a close is applied where it stands, so it cancels what was
    enqueued before it and not what comes after.
    """
    results = [Applied() for _ in decisions]
    run: list[int] = []  # indexes of the enqueues not yet written

    def flush() -> None:
        jobs = [(cast(Enqueue, decisions[i].decision).job, decisions[i].at) for i in run]
        for i, (job, _), new in zip(run, jobs, enqueue_many(conn, jobs),
                                    strict=True):
            (results[i].enqueued if new else results[i].duplicates).append(job.dedupe_key)
        run.clear()

    for index, decided in enumerate(decisions):
        decision = decided.decision
        if isinstance(decision, Enqueue):
            run.append(index)
            continue
        if run:
            flush()
        if isinstance(decision, Close):
            results[index].cancelled.extend(
                cancel_pull_request(conn, decision.repo, decision.pr_number))
            closures.record_close(conn, decision.repo, decision.pr_number,
                                  merged=decision.merged, at=decided.at)
        elif isinstance(decision, Decline):
            fingerprint = posted_findings.decline_reply(
                conn, decision.repo, decision.pr_number, decision.reply_to)
            if fingerprint is not None:
                results[index].declined.append(fingerprint)
                # Its open-findings count changed; the maintenance loop writes it.
                summaries.request(conn, decision.repo, decision.pr_number, decided.at)
                log.info("a reply declined one of the App's findings",
                         extra={"repo": decision.repo, "pr": decision.pr_number,
                                "comment_id": decision.reply_to, "by": decision.by})
        elif isinstance(decision, Ignore):
            results[index].ignored = decision.reason
    if run:
        flush()
    return results
