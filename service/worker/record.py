"""The ``runs`` row: what a paid review or description produced, written before publishing.

``record_run`` runs inside the transaction that also settles the ledger and finishes the
queue row (see ``job.py``), so a run is recorded exactly when its cost is: a crash
between the two cannot leave a review that was paid for and forgotten, or recorded and
never charged. The publisher reads ``RecordedRun`` afterwards; a failed post is retried
from the row, without a second review.

JSON shapes (the columns are TEXT):

- ``findings``: ``[{"path", "line", "side", "start_line", "severity", "category",
  "title", "body"}, ...]``
- ``assessment``: ``{"summary", "risk"}`` for a review, NULL for a description or when
  the engine gave none
- ``description``: ``{"title", "summary", "changes": [...]}`` for ``describe``, else NULL
- ``omitted``: ``[{"path", "reason": "excluded"|"max_diff_lines", "lines", "pattern"?}]``
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from service.budget import Usage
from service.engine.base import Assessment, Description, Finding
from service.queue import Claim
from service.store import to_db_time
from service.worker.diff import Omitted

Outcome = Literal["completed", "truncated", "failed"]
OUTCOMES: Final = ("completed", "truncated", "failed")

_INSERT = """
INSERT INTO runs (dedupe_key, repo, pr_number, head_sha, outcome, findings, recorded_at,
                  omitted, assessment, description)
VALUES (:dedupe_key, :repo, :pr_number, :head_sha, :outcome, :findings, :recorded_at,
        :omitted, :assessment, :description)
"""

# The head of the last review that saw everything: a description is not a review, and a
# truncated or failed one left something unread, so neither can be the start of an
# incremental round.
_LAST_COMPLETED_HEAD = """
SELECT head_sha FROM runs
 WHERE repo = :repo AND pr_number = :pr_number AND outcome = 'completed'
   AND description IS NULL
 ORDER BY recorded_at DESC, rowid DESC LIMIT 1
"""

_OPEN_RESERVATION = """
SELECT reserved_tokens FROM ledger
 WHERE dedupe_key = :key AND owner = :owner AND settled_at IS NULL
"""


@dataclass(frozen=True)
class RecordedRun:
    """One recorded run, as the publisher receives it.

    ``claim`` says who asked and where to answer (``comment_id``/``comment_source`` of a
    mention); ``reviewed_since`` is the commit an incremental review started from (None:
    the whole pull request); ``omitted`` what layer 2 withheld.
    """

    claim: Claim
    head_sha: str
    base_sha: str
    reviewed_since: str | None
    outcome: Outcome
    stop_reason: str
    findings: tuple[Finding, ...]
    assessment: Assessment | None
    description: Description | None
    omitted: tuple[Omitted, ...]
    usage: Usage
    recorded_at: datetime
    detail: str = ""
    resets_at: datetime | None = None  # when a plan limit said it resets (usage_limit)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def dedupe_key(self) -> str:
        return self.claim.dedupe_key


def finding_json(finding: Finding) -> dict[str, object]:
    return {"path": finding.path, "line": finding.line, "side": finding.side,
            "start_line": finding.start_line, "severity": finding.severity,
            "category": finding.category, "title": finding.title, "body": finding.body}


def assessment_json(assessment: Assessment) -> dict[str, object]:
    return {"summary": assessment.summary, "risk": assessment.risk}


def description_json(description: Description) -> dict[str, object]:
    return {"title": description.title, "summary": description.summary,
            "changes": list(description.changes)}


def _dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def record_run(conn: sqlite3.Connection, run: RecordedRun) -> None:
    """Insert ``run`` into ``runs`` inside the caller's transaction.

    A second run for one dedupe key is an IntegrityError on purpose: the queue row is
    finished in the same transaction, so it can only mean the lifecycle was broken.
    """
    conn.execute(_INSERT, {
        "dedupe_key": run.claim.dedupe_key, "repo": run.claim.repo,
        "pr_number": run.claim.pr_number, "head_sha": run.head_sha, "outcome": run.outcome,
        "findings": _dump([finding_json(f) for f in run.findings]),
        "recorded_at": to_db_time(run.recorded_at),
        "omitted": _dump([o.as_json() for o in run.omitted]),
        "assessment": None if run.assessment is None else _dump(assessment_json(run.assessment)),
        "description": (None if run.description is None
                        else _dump(description_json(run.description))),
    })


def last_completed_head(conn: sqlite3.Connection, repo: str, pr_number: int) -> str | None:
    """The head sha of the last completed review of this pull request, if any."""
    row = conn.execute(_LAST_COMPLETED_HEAD, {"repo": repo, "pr_number": pr_number}).fetchone()
    return None if row is None else str(row[0])


def open_reservation(conn: sqlite3.Connection, claim: Claim) -> int | None:
    """``reserved_tokens`` of the claim's open ledger row, or None when it is not open
    (the lease lapsed and a later claim closed it as ``lost``)."""
    row = conn.execute(_OPEN_RESERVATION,
                       {"key": claim.dedupe_key, "owner": claim.owner}).fetchone()
    return None if row is None else int(row[0])
