"""What one publication is about, read back from the store (pure).

The publisher never works from memory: a run is published from its ``runs`` row (what the
engine found), its ``queue`` row (who asked, and where) and its settled ``ledger`` row (what
it cost, under which rung). That is what lets a retry after a crash or a restart publish
exactly what the first attempt would have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from service.budget.ladder import Mode
from service.engine.base import Assessment, Description, Finding
from service.publish import coverage
from service.publish.run_content import (
    AskAnswer,
    Coverage,
    Fixed,
    Omitted,
    parse_answer,
    parse_assessment,
    parse_coverage,
    parse_description,
    parse_findings,
    parse_fixed,
    parse_omitted,
)

#: Ledger rungs under which the engine was asked for a reduced review.
REDUCED_MODES: Final = frozenset(m.value for m in Mode if m.engine_mode == "reduced")


@dataclass(frozen=True)
class RunAccount:
    """The settled ledger row of a run: what the one-line account in a post says."""

    tokens: int | None
    reserved: int
    confidence: str | None
    engine: str | None
    model: str | None
    mode: str
    stop_reason: str | None
    reviewed_since: str | None
    cost_usd: float | None = None  # as the engine reported it
    #: What the trigger's earlier attempts were charged (one that did not finish is
    #: charged its whole reservation): part of what the trigger cost, beside ``tokens``.
    earlier_tokens: int = 0

    @property
    def reduced(self) -> bool:
        """True when the run was admitted on a rung that reviews correctness and
        security only."""
        return self.mode in REDUCED_MODES


@dataclass(frozen=True)
class Publication:
    """One recorded run, as the publisher posts it."""

    dedupe_key: str
    kind: str                 # pr_opened | mention
    command: str              # review | describe | ask
    repo: str
    pr_number: int
    head_sha: str
    comment_id: int | None    # the mention's comment
    comment_source: str | None
    outcome: str              # runs.outcome: completed | truncated | failed
    findings: tuple[Finding, ...]
    assessment: Assessment | None
    description: Description | None
    omitted: tuple[Omitted, ...]
    account: RunAccount
    attempts: int             # publish_attempts, this attempt included
    #: Findings the thresholds kept back, by severity (``publisher.thresholds``).
    not_shown: tuple[tuple[str, int], ...] = ()
    #: Findings not posted because they were posted on this pull request before.
    repeated: int = 0
    #: Earlier findings the engine said no longer hold: their threads are resolved.
    fixed: tuple[Fixed, ...] = ()
    #: What the run read of the pull request; None for a run recorded without it.
    coverage: Coverage | None = None
    #: An ``ask``'s question and answer; None for a review or a description.
    answer: AskAnswer | None = None

    @property
    def partial(self) -> bool:
        """Something the review was meant to read was not read: a file left out for any
        reason but the operator's own ``review.excluded_paths``."""
        return coverage.partial(self.omitted)

    @property
    def is_mention(self) -> bool:
        return self.kind == "mention"

    @property
    def is_ask(self) -> bool:
        """A question's answer: posted where it was asked, never as a review."""
        return self.command == "ask" or self.answer is not None

    @property
    def is_describe(self) -> bool:
        return self.command == "describe" or self.description is not None


def kind_of(dedupe_key: str) -> str:
    """``pr_opened`` or ``mention``, from the key's prefix."""
    return dedupe_key.split(":", 1)[0]


def build(run: Mapping[str, Any], queue: Mapping[str, Any] | None,
          ledger: Mapping[str, Any] | None) -> Publication:
    """A ``Publication`` from the three rows (``queue``/``ledger`` None when absent)."""
    key = str(run["dedupe_key"])
    description = parse_description(run.get("description"))
    command = str(queue["command"]) if queue else ("describe" if description else "review")
    account = RunAccount(
        tokens=None if ledger is None else ledger.get("used_tokens"),
        reserved=0 if ledger is None else int(ledger.get("reserved_tokens") or 0),
        confidence=None if ledger is None else ledger.get("usage_confidence"),
        engine=None if ledger is None else ledger.get("engine"),
        model=None if ledger is None else ledger.get("model"),
        mode="full" if ledger is None else str(ledger.get("mode") or "full"),
        stop_reason=None if ledger is None else ledger.get("stop_reason"),
        reviewed_since=None if ledger is None else ledger.get("reviewed_since"),
        cost_usd=None if ledger is None or ledger.get("cost_usd") is None
        else float(ledger["cost_usd"]),
        earlier_tokens=0 if ledger is None else int(ledger.get("earlier_tokens") or 0),
    )
    return Publication(
        dedupe_key=key,
        kind=str(queue["kind"]) if queue else kind_of(key),
        command=command,
        repo=str(run["repo"]),
        pr_number=int(run["pr_number"]),
        head_sha=str(run["head_sha"]),
        comment_id=None if queue is None else queue.get("comment_id"),
        comment_source=None if queue is None else queue.get("comment_source"),
        outcome=str(run["outcome"]),
        findings=parse_findings(run.get("findings")),
        assessment=parse_assessment(run.get("assessment")),
        description=description,
        omitted=parse_omitted(run.get("omitted")),
        account=account,
        attempts=int(run.get("publish_attempts") or 0),
        fixed=parse_fixed(run.get("fixed")),
        coverage=parse_coverage(run.get("coverage")),
        answer=parse_answer(run.get("answer")),
    )
