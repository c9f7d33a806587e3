"""What is added to the queue, and what a closed pull request takes out of it.

The webhook receiver and the poller both add jobs here through the ingest seam
(``service.intake.ingest``), in the caller's transaction: a delivery is recorded with its
enqueues or not at all. Several jobs go in one multi-row INSERT, a few statements for a
whole batch of deliveries. The statuses and events are ``service.storage.queue``'s.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from service.model.jobs import Job
from service.storage.database import Transaction
from service.storage.queue import LIFECYCLE, PENDING, target
from service.storage.times import to_db_time

log = logging.getLogger(__name__)

_in: Final = LIFECYCLE.sql_in

# A conflicting key changes nothing unless it revives a cancelled pr_opened; RETURNING
# names the rows inserted or revived, which are the new ones.
_INSERT_HEAD = """
INSERT INTO queue (dedupe_key, kind, repo, pr_number, head_sha, actor_id, status,
                   attempts, enqueued_at, comment_id, comment_source, command)
VALUES """
_INSERT_ROW = f"(?, ?, ?, ?, ?, ?, '{PENDING}', 0, ?, ?, ?, ?)"
_INSERT_TAIL = f"""
ON CONFLICT (dedupe_key) DO UPDATE SET status = '{target("revive")}',
                                       enqueued_at = excluded.enqueued_at
 WHERE queue.status IN {_in("revive")} AND queue.kind = 'pr_opened'
RETURNING dedupe_key
"""
#: Rows per INSERT: far under SQLite's limit of 32 766 bound values.
_CHUNK: Final = 500

# One statement for every pull request that got a new pr_opened: (repo, number, newest key).
_SUPERSEDE_OLDER = f"""
UPDATE queue SET status = '{target("supersede")}'
  FROM (VALUES {{}}) AS newest
 WHERE queue.kind = 'pr_opened' AND queue.repo = newest.column1
   AND queue.pr_number = newest.column2 AND queue.dedupe_key != newest.column3
   AND queue.status IN {_in("supersede")}
RETURNING queue.repo, queue.pr_number
"""

_CANCEL_PR = f"""
UPDATE queue SET status = '{target("cancel")}'
 WHERE repo = :repo AND pr_number = :pr_number AND status IN {_in("cancel")}
 RETURNING dedupe_key
"""


def enqueue(tx: Transaction, job: Job, *, now: datetime) -> bool:
    """Add ``job`` unless its dedupe key is already known; True if the row is new.

    A ``pr_opened`` row ``cancelled`` because its pull request closed comes back to
    ``pending`` (True) when the same trigger arrives again: the pull request reopened at
    the same head. A mention is not revived: nobody asked again.

    A new ``pr_opened`` supersedes every older *pending* ``pr_opened`` of the same pull
    request (status ``superseded``): only the newest head is worth paying for.
    """
    return enqueue_many(tx, [(job, now)])[0]


def enqueue_many(tx: Transaction, jobs: Sequence[tuple[Job, datetime]]) -> list[bool]:
    """``enqueue`` each ``(job, now)``, in order, in a few statements; one flag each.

    The outcome is the same as calling ``enqueue`` for each in turn: a key given twice is
    new at most once, and of several new heads of one pull request only the last stays
    pending.
    """
    new: list[bool] = []
    for start in range(0, len(jobs), _CHUNK):
        new += _insert(tx, jobs[start:start + _CHUNK])
    # The last new head of each pull request is the one that stays pending.
    newest: dict[tuple[str, int], str] = {}
    for (job, _), is_new in zip(jobs, new, strict=True):
        if is_new and job.kind == "pr_opened":
            newest[(job.repo, job.pr_number)] = job.dedupe_key
    if newest:
        _supersede_older(tx, newest)
    return new


def _insert(tx: Transaction, jobs: Sequence[tuple[Job, datetime]]) -> list[bool]:
    values: list[object] = []
    for job, now in jobs:
        values += (job.dedupe_key, job.kind, job.repo, job.pr_number, job.head_sha,
                   job.actor_id, to_db_time(now), job.comment_id, job.comment_source,
                   job.command)
    returned = {str(found[0]) for found in tx.execute(
        _INSERT_HEAD + ", ".join([_INSERT_ROW] * len(jobs)) + _INSERT_TAIL, values)}
    # A key given twice in one INSERT is new at most once: the first time.
    new = []
    for job, _ in jobs:
        new.append(job.dedupe_key in returned)
        returned.discard(job.dedupe_key)
    return new


def _supersede_older(tx: Transaction, newest: dict[tuple[str, int], str]) -> None:
    values: list[object] = []
    for (repo, pr_number), key in newest.items():
        values += (repo, pr_number, key)
    found = tx.execute(
        _SUPERSEDE_OLDER.format(", ".join(["(?, ?, ?)"] * len(newest))), values).fetchall()
    superseded = Counter((str(repo), int(pr)) for repo, pr in found)
    for (repo, pr_number), count in superseded.items():
        log.info("superseded %d older pending review(s)", count, extra={
            "repo": repo, "pr": pr_number, "dedupe_key": newest[(repo, pr_number)]})


def cancel_pull_request(tx: Transaction, repo: str, pr_number: int) -> list[str]:
    """Cancel the pending rows of a pull request that closed; returns their keys.

    A row already claimed is left to its worker, which re-reads the pull request and
    settles at zero with ``closed``.
    """
    found = tx.execute(_CANCEL_PR, {"repo": repo, "pr_number": pr_number}).fetchall()
    return [str(r[0]) for r in found]
