"""The publisher's view of one run in the store: its lease, its three rows, its outcome.

Each function runs in the caller's transaction (``conn``), and each caller keeps that
transaction short — never across a GitHub call. A publication attempt starts by taking
the run's lease (``claim``: ``runs.lease`` counts the attempt, and only a recorded run
whose content is held can be leased), so two workers, or a worker and the re-offer loop,
or two processes on one store, never publish one run at the same time. It ends with
``record_outcome`` or ``runs.fail`` (which clear the lease), or ``runs.release`` when it
will be retried. The lifecycle itself is ``service.storage.runs.TRANSITIONS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Final

from service.publish.publication import Publication, build
from service.storage import agent_comments, ledger, runs
from service.storage import queue as queue_table
from service.storage.database import Transaction

#: publish_outcome values.
OUTCOMES: Final = tuple(runs.CONCLUSIONS.values())


def claim(conn: Transaction, key: str, now: datetime,
          until: datetime) -> Publication | None:
    """Take the run's publication lease and count the attempt; the run to publish, or
    None when there is nothing to do (no such run, already decided, purged, or another
    attempt holds the lease). Raises ValueError when the stored content is malformed (the
    transaction then rolls back; the caller stamps the run as failed)."""
    if not runs.lease(conn, key, now, until):
        return None
    return load(conn, key)


def load(conn: Transaction, key: str) -> Publication | None:
    """The publication of ``key`` as stored, or None when there is no such run."""
    run = runs.stored(conn, key)
    if run is None:
        return None
    row = queue_table.row(conn, key)
    queue = None if row is None else {
        "kind": row.kind, "command": row.command, "comment_id": row.comment_id,
        "comment_source": row.comment_source}
    usage = ledger.settled_usage(conn, repo=str(run["repo"]), pr_number=int(run["pr_number"]),
                                 key=key)
    return build(run, queue, usage)


def record_outcome(conn: Transaction, *, key: str, repo: str, outcome: str,
                   now: datetime, published: bool, comment_id: int | None,
                   posted: Iterable[int] = ()) -> bool:
    """How publication ended; ``posted`` are ids of comments the App wrote (they go into
    ``agent_comments``, so the trigger rules never take them for a request). False when
    an outcome was already recorded (nothing is changed then)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"publish outcome must be one of {OUTCOMES}, got {outcome!r}")
    changed = runs.conclude(conn, key, outcome=outcome,
                            published_at=now if published else None, comment_id=comment_id)
    agent_comments.remember(conn, repo, posted, now)
    return changed
