"""The ``runs`` row: what a paid review, description or answer produced, written before publishing.

``record_run`` runs inside the transaction that also settles the ledger and finishes the
queue row (see ``job.py``), so a run is recorded exactly when its cost is: a crash
between the two cannot leave a review that was paid for and forgotten, or recorded and
never charged. The publisher reads ``RecordedRun`` afterwards; a failed post is retried
from the row, without a second review.

The content's JSON forms are ``service.publish.run_content``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

from service.budget.usage import Usage
from service.engine.base import Assessment, Description, Finding
from service.publish.run_content import (
    AskAnswer,
    Coverage,
    Fixed,
    Omitted,
    encode_answer,
    encode_assessment,
    encode_coverage,
    encode_description,
    encode_findings,
    encode_fixed,
    encode_omitted,
)
from service.storage import runs
from service.storage.database import Transaction
from service.storage.queue import Claim

Outcome = Literal["completed", "truncated", "failed"]
OUTCOMES: Final = ("completed", "truncated", "failed")


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
    #: Earlier findings the engine said no longer hold (their threads to resolve).
    fixed: tuple[Fixed, ...] = ()
    #: What the run read of the pull request (None: nothing was counted, e.g. describe of
    #: an empty change).
    coverage: Coverage | None = None
    #: The pull request's whole diff as GitHub anchors review comments to it, when the
    #: worker read exactly that (a full review against GitHub's base): the first attempt
    #: places inline comments on it instead of fetching it again. Not stored; a retry
    #: fetches it.
    anchors: str | None = field(default=None, compare=False, repr=False)
    #: An ``ask``'s question and answer (None for a review or a description).
    answer: AskAnswer | None = None

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, got {self.outcome!r}")

    @property
    def dedupe_key(self) -> str:
        return self.claim.dedupe_key


def record_run(conn: Transaction, run: RecordedRun) -> None:
    """Insert ``run`` into ``runs`` inside the caller's transaction.

    A second run for one dedupe key is an IntegrityError on purpose: the queue row is
    finished in the same transaction, so it can only mean the lifecycle was broken.
    """
    runs.insert(conn, runs.RunRow(
        dedupe_key=run.claim.dedupe_key, repo=run.claim.job.repo,
        pr_number=run.claim.job.pr_number, head_sha=run.head_sha, outcome=run.outcome,
        findings=encode_findings(run.findings), recorded_at=run.recorded_at,
        omitted=encode_omitted(run.omitted), assessment=encode_assessment(run.assessment),
        description=encode_description(run.description), fixed=encode_fixed(run.fixed),
        coverage=encode_coverage(run.coverage), answer=encode_answer(run.answer)))
