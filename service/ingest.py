"""What both ingest paths do with a trigger decision, in the caller's transaction.

The webhook receiver and the poller classify the same events with the same rules
(``service.triggers``) and must then have the same effect, so that whichever sees an
event first acts on it and the other is a no-op: an ``Enqueue`` is an idempotent insert
on its dedupe key; a ``Close`` cancels the pull request's pending rows and records the
closure for the retention sweep.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime

from service.queue import ReviewQueue
from service.store import SqliteStore, to_db_time
from service.triggers import Close, Decision, Enqueue, Ignore

log = logging.getLogger(__name__)

_RECORD_CLOSE = """
INSERT INTO closed_pull_requests (repo, pr_number, merged, closed_at)
VALUES (:repo, :pr_number, :merged, :closed_at)
ON CONFLICT (repo, pr_number) DO UPDATE SET
    merged = excluded.merged, closed_at = excluded.closed_at, purged_at = NULL
"""


@dataclass
class Applied:
    """The effect of one or more decisions: what was enqueued, cancelled, or ignored."""

    enqueued: list[str] = field(default_factory=list)   # new queue rows, by dedupe key
    duplicates: list[str] = field(default_factory=list)  # keys that were already queued
    cancelled: list[str] = field(default_factory=list)   # pending rows of a closed PR
    ignored: str | None = None                           # the reason, for one Ignore


def apply_decision(
    conn: sqlite3.Connection, queue: ReviewQueue, decision: Decision, *, now: datetime,
    applied: Applied | None = None,
) -> Applied:
    """Carry out ``decision`` inside ``conn``'s transaction and say what happened."""
    result = applied if applied is not None else Applied()
    if isinstance(decision, Enqueue):
        key = decision.job.dedupe_key
        if queue.enqueue(decision.job, now=now, conn=conn):
            result.enqueued.append(key)
        else:
            result.duplicates.append(key)
    elif isinstance(decision, Close):
        result.cancelled.extend(
            queue.cancel_pull_request(decision.repo, decision.pr_number, conn=conn))
        conn.execute(_RECORD_CLOSE, {
            "repo": decision.repo, "pr_number": decision.pr_number,
            "merged": int(decision.merged), "closed_at": to_db_time(now),
        })
    elif isinstance(decision, Ignore):
        result.ignored = decision.reason
    return result


class AgentComments:
    """Is this comment id one the agent posted? (``agent_comments``, never pruned.)

    A ``TriggerContext.agent_comments`` predicate. Inside a ``transaction()`` on the same
    thread, ``read()`` joins it, so the webhook's classification sees its own writes.
    """

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __call__(self, comment_id: int) -> bool:
        with self._store.read() as conn:
            row = conn.execute(
                "SELECT 1 FROM agent_comments WHERE comment_id = ? LIMIT 1", (comment_id,)
            ).fetchone()
        return row is not None
