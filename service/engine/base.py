"""The engine protocol: what a worker hands an engine and what it always gets back.

An engine turns one ``EngineRequest`` (a checked-out worktree, its diff, the pull
request's untrusted title and body, the base branch's guidelines, the limits) into one
``EngineResult``. ``Engine.run`` never raises for anything the engine does — a missing
binary, a crash, garbage output, a hang, a plan limit: every outcome is a result with an
honest ``stop_reason`` and the best usage figure that could be read. Only a programming
error in the caller (a malformed request) raises, and it does so at construction.

These names are the seam the worker builds on; keep them stable.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final, Literal, Protocol, get_args

from service.budget.usage import STOP_REASONS, Usage
from service.engine.windows import Window
from service.model.severity import SEVERITIES, Severity

Command = Literal["review", "describe", "ask"]
COMMANDS: Final = get_args(Command)
ReviewMode = Literal["full", "reduced"]  # reduced = correctness and security only
Side = Literal["RIGHT", "LEFT"]
Category = Literal[
    "correctness", "security", "performance", "maintainability", "tests", "docs", "style"
]
Risk = Literal["low", "medium", "high"]

SIDES: Final = get_args(Side)
CATEGORIES: Final = get_args(Category)
RISKS: Final = get_args(Risk)
#: The categories a ``reduced`` review may report.
REDUCED_CATEGORIES: Final = ("correctness", "security")

#: Cap on ``EngineResult.detail``: a reason for a log line and the runs table, not a dump.
DETAIL_MAX_CHARS: Final = 300
#: Caps on model-written text, so a runaway answer cannot bloat a review or the store.
TITLE_MAX_CHARS: Final = 200
BODY_MAX_CHARS: Final = 8000
#: The longest replacement code a finding may propose; a longer one is not offered.
SUGGESTION_MAX_CHARS: Final = 5000
#: The longest answer to a question the schema allows; the publisher cuts it further, to
#: ``ask.max_answer_chars``.
ANSWER_MAX_CHARS: Final = 60_000


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class Finding:
    """One review comment the model proposes, anchored to a file line.

    ``line`` is the line number in the file on ``side`` (``RIGHT`` = the head version,
    ``LEFT`` = the base version), as GitHub's review-comment API takes it; ``start_line``
    (same side, ≤ ``line``) makes it a multi-line comment. Whether it can be posted
    inline is decided against the diff by ``hunks.split_findings``.
    """

    path: str
    line: int
    side: Side
    start_line: int | None
    severity: Severity
    category: Category
    title: str
    body: str
    #: Replacement code for lines ``start_line``..``line`` of the new version (``RIGHT``
    #: only), exactly as they should read; the publisher offers it as a committable
    #: suggestion when GitHub can anchor it. None: no replacement proposed.
    suggestion: str | None = None
    #: Who the finding is across reviews (``service.model.fingerprint``): set by the worker from
    #: the code it points at, not by the engine; not part of equality.
    fingerprint: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _require(bool(self.path) and not self.path.startswith("/"),
                 "finding path must be a non-empty repository-relative path")
        _require(_positive(self.line), "finding line must be a positive integer")
        _require(self.side in SIDES, f"finding side must be one of {SIDES}")
        if self.start_line is not None:
            _require(_positive(self.start_line) and self.start_line <= self.line,
                     "finding start_line must be a positive integer no greater than line")
        _require(self.severity in SEVERITIES, f"finding severity must be one of {SEVERITIES}")
        _require(self.category in CATEGORIES, f"finding category must be one of {CATEGORIES}")
        _require(bool(self.title.strip()), "finding title must not be empty")
        _require(bool(self.body.strip()), "finding body must not be empty")


def _positive(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class Assessment:
    """The review's overall verdict: a short summary and a risk level."""

    summary: str
    risk: Risk

    def __post_init__(self) -> None:
        _require(bool(self.summary.strip()), "assessment summary must not be empty")
        _require(self.risk in RISKS, f"assessment risk must be one of {RISKS}")


@dataclass(frozen=True)
class Description:
    """What ``describe`` produces: a proposed title, a summary and the list of changes."""

    title: str
    summary: str
    changes: tuple[str, ...]

    def __post_init__(self) -> None:
        _require(bool(self.title.strip()), "description title must not be empty")
        _require(bool(self.summary.strip()), "description summary must not be empty")
        _require(all(isinstance(c, str) and c.strip() for c in self.changes),
                 "description changes must be non-empty strings")


@dataclass(frozen=True)
class EarlierFinding:
    """A finding the App posted on this pull request before whose code has changed since:
    the engine says (by ``ref``) whether it no longer holds."""

    ref: str           # E1, E2, ... as the prompt and the answer name it
    fingerprint: str
    thread_id: str     # its review thread (GraphQL node id)
    path: str
    line: int
    severity: str
    category: str
    title: str


@dataclass(frozen=True)
class Question:
    """What ``ask`` is asked, and about what. Everything here is untrusted (people wrote
    it, or the model did earlier); the prompt fences and cleans it like the title.

    ``thread`` is the review thread so far (``(login, body)``, oldest first, the App's
    finding first) when the question was asked in one; ``lines`` the code it points at
    (``path:line`` and the diff hunk GitHub shows above it); ``findings`` the review's open
    findings on the pull request, one line each; ``max_chars`` how long the answer may be.
    """

    text: str
    asker: str
    max_chars: int
    thread: tuple[tuple[str, str], ...] = ()
    lines: str | None = None
    findings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require(_positive(self.max_chars), "question max_chars must be a positive integer")


@dataclass(frozen=True)
class EngineRequest:
    """One run's input. ``title``/``body`` are untrusted (the prompt fences and cleans
    them); ``guidelines`` must come from the BASE branch, never the head.

    ``reviewed_since`` is the commit an incremental review starts from (the diff is then
    ``reviewed_since...head``); ``None`` for a full review. ``log_extra`` is copied into
    every log record's ``extra`` (delivery_id, repo, pr, dedupe_key, attempt).
    """

    command: Command
    workdir: Path
    diff: str
    changed_paths: tuple[str, ...]
    title: str
    body: str
    guidelines: str | None
    base_sha: str
    head_sha: str
    reviewed_since: str | None
    mode: ReviewMode
    max_turns: int
    wall_clock_seconds: float
    max_run_tokens: int
    log_extra: Mapping[str, object] = field(default_factory=dict)
    #: The repository's own words for the reviewer (its ``.github/pr-review-agent.yml``,
    #: from the default branch): data like the guidelines, never the system's rules.
    instructions: str | None = None
    #: The language the answer's text is written in; None: English.
    language: str | None = None
    #: Findings declined on this pull request (``path:line (category) title``): not to be
    #: raised again.
    declined: tuple[str, ...] = ()
    #: Earlier findings whose code changed, to be re-checked (the answer's ``fixed``).
    earlier: tuple[EarlierFinding, ...] = ()
    #: Guideline files of the directories this call's files are in (``(directory, text)``,
    #: nearest first), from the base branch like ``guidelines``: they apply under their
    #: directory, the nearest winning.
    directory_guidelines: tuple[tuple[str, str], ...] = ()
    #: The repository file's ``path_instructions`` that match this call's files
    #: (``(glob, text)``): its words, like ``instructions``, for those files only.
    path_instructions: tuple[tuple[str, str], ...] = ()
    #: Set when the pull request is reviewed in several calls (``review.packing``): which
    #: part this is, e.g. "part 2 of 3", for the prompt to say so.
    part: str | None = None
    #: The question, for ``ask`` (and only then).
    question: Question | None = None

    def __post_init__(self) -> None:
        _require(self.command in COMMANDS,
                 f"command must be one of {COMMANDS}, got {self.command!r}")
        _require((self.command == "ask") == (self.question is not None),
                 "an ask carries its question, and only an ask does")
        _require(self.mode in ("full", "reduced"),
                 f"mode must be 'full' or 'reduced', got {self.mode!r}")
        _require(_positive(self.max_turns), "max_turns must be a positive integer")
        _require(self.wall_clock_seconds > 0, "wall_clock_seconds must be positive")
        _require(_positive(self.max_run_tokens), "max_run_tokens must be a positive integer")
        _require(isinstance(self.changed_paths, tuple), "changed_paths must be a tuple")


@dataclass(frozen=True)
class EngineResult:
    """One run's outcome. ``usage`` is what the ledger settles with: ``tokens=None``
    (confidence ``unavailable``) keeps the whole reservation charged.

    ``findings``/``assessment`` are set for a completed ``review``, ``description`` for a
    completed ``describe``, ``answer`` (Markdown) for a completed ``ask``; a non-completed
    run may still carry what it got. ``detail`` is a short human reason (never a secret,
    never the model's raw output).
    ``usage_limit_resets_at`` is set only with ``stop_reason == 'usage_limit'`` and only
    when the engine said when the limit resets.
    """

    usage: Usage
    stop_reason: str
    findings: tuple[Finding, ...] = ()
    assessment: Assessment | None = None
    description: Description | None = None
    answer: str | None = None
    #: Refs (``E1``...) of the request's earlier findings the engine says no longer hold.
    fixed: tuple[str, ...] = ()
    cost_usd: float | None = None
    usage_limit_resets_at: datetime | None = None
    detail: str = ""
    session_id: str | None = None
    turns: int | None = None
    #: The prompt did not fit the model's context window (the engine measured it so, or
    #: the server refused it so): nothing was read, and the worker lists its files as over
    #: the window instead of calling the run failed.
    over_window: bool = False

    def __post_init__(self) -> None:
        _require(self.stop_reason in STOP_REASONS,
                 f"stop_reason must be one of {STOP_REASONS}, got {self.stop_reason!r}")
        if self.usage_limit_resets_at is not None:
            _require(self.usage_limit_resets_at.tzinfo is not None,
                     "usage_limit_resets_at must be timezone-aware")
        if len(self.detail) > DETAIL_MAX_CHARS:
            object.__setattr__(self, "detail", self.detail[: DETAIL_MAX_CHARS - 1] + "…")


@dataclass(frozen=True)
class Sizing:
    """What the worker sizes a run's calls by (``review.packing``).

    ``window`` is the model's context window; ``answer_tokens`` the answer each call
    asks room for (the configured ``max_tokens``, or Claude Code's per-call output cap);
    ``overhead_tokens`` what every call carries that the prompt does not show (Claude
    Code's own system prompt and tools); ``bytes_per_token`` how the engine counts text
    it has not sent (2 for the HTTP engines' conservative bound, 4 for Claude Code's
    rule of thumb).
    """

    window: Window
    answer_tokens: int
    overhead_tokens: int = 0
    bytes_per_token: float = 2.0

    def tokens_of(self, text: str) -> int:
        """``text``'s tokens as this engine would estimate them."""
        return math.ceil(len(text.encode("utf-8")) / self.bytes_per_token)


class Engine(Protocol):
    """A review engine. ``run`` never raises for engine behaviour (see module doc)."""

    name: str

    async def run(self, request: EngineRequest) -> EngineResult:
        """Review, describe or answer a question about the change in ``request``; always
        return a result."""
        ...

    async def sizing(self, reservation: int) -> Sizing:
        """The model's window and how calls are counted, for a run of ``reservation``."""
        ...

    async def price(self, request: EngineRequest) -> int:
        """The input tokens of ``request``'s first call, counted as the run will count
        them (a server's own count where the engine uses one), overhead included."""
        ...


def no_usage(engine: str, model: str | None) -> Usage:
    """Usage for a run that provably spent nothing (e.g. the binary is missing)."""
    return Usage(tokens=0, confidence="exact", engine=engine, model=model)


def unknown_usage(engine: str, model: str | None) -> Usage:
    """Usage for a run whose spend could not be read: the reservation stays charged."""
    return Usage(tokens=None, confidence="unavailable", engine=engine, model=model)


_CONFIDENCE_ORDER: Final = ("exact", "estimated", "unavailable")


def combine_usage(first: Usage, second: Usage) -> Usage:
    """The usage of two calls of one run: tokens add up, confidence is the weaker one,
    and an unknown part makes the whole unknown (the reservation then stays charged)."""
    worst = max(first.confidence, second.confidence, key=_CONFIDENCE_ORDER.index)
    tokens = (None if first.tokens is None or second.tokens is None
              else first.tokens + second.tokens)
    if tokens is None:
        worst = "unavailable"
    # The later call names the model actually used (the first may be the configured one).
    return Usage(tokens=tokens, confidence=worst, engine=first.engine or second.engine,
                 model=second.model or first.model)


def estimate_tokens(*texts: str) -> int:
    """A rough token count for text a server did not count: one token per 4 characters
    (rounded up per text), the usual rule of thumb for English and code."""
    return sum(-(-len(text) // 4) for text in texts)
