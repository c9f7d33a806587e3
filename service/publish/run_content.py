"""A run's content in its stored form: the JSON the ``runs`` table keeps, both ways.

The worker encodes what the engine found when it records a run; the publisher decodes
it when it publishes (perhaps after a restart, from the row alone). One module holds both
directions so that the two cannot drift apart. Shapes (the columns are TEXT):

- ``findings``: ``[{"path", "line", "side", "start_line", "severity", "category",
  "title", "body"}, ...]``
- ``assessment``: ``{"summary", "risk"}`` for a review, NULL for a description or when
  the engine gave none
- ``description``: ``{"title", "summary", "changes": [...]}`` for ``describe``, else NULL
  (``{}`` once the retention sweep purged it)
- ``omitted``: ``[{"path", "reason", "lines", "pattern"?}]``, ``reason`` one of
  ``OMIT_REASONS`` (what left the file unread: ``excluded`` by a pattern, over
  ``max_diff_lines``, shed to fit the window, ``over_window``, over ``max_run_tokens``,
  or its part of the run ``not_reviewed`` because that call failed)
- ``coverage``: ``{"files", "reviewed", "parts", "pruned": [...]}``: how many of the
  pull request's files the engine read, in how many calls, and what was cut from the
  diff to fit; NULL for a run recorded before coverage was kept
- ``fixed``: ``[{"fingerprint", "thread_id"}]``, the earlier findings the engine said no
  longer hold (their threads to resolve), or NULL
- ``answer``: ``{"question", "text", "reply_to"}`` for ``ask`` (``text`` null when the run
  produced no answer; ``reply_to`` the review thread's root comment, null for the
  conversation), else NULL (``{}`` once purged)

Decoding a malformed value is a ``ValueError`` naming the column.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, cast, get_args

from service.engine.base import Assessment, Description, Finding

__all__ = [
    "OMIT_REASONS",
    "AskAnswer",
    "Coverage",
    "Fixed",
    "OmitReason",
    "Omitted",
    "assessment_json",
    "description_json",
    "dump",
    "encode_answer",
    "encode_assessment",
    "encode_coverage",
    "encode_description",
    "encode_findings",
    "encode_fixed",
    "encode_omitted",
    "finding_json",
    "parse_answer",
    "parse_assessment",
    "parse_coverage",
    "parse_description",
    "parse_findings",
    "parse_fixed",
    "parse_omitted",
]

OmitReason = Literal["excluded", "max_diff_lines", "lock_file", "generated", "vendored",
                     "renamed_only", "over_window", "max_run_tokens", "not_reviewed"]
OMIT_REASONS: Final = get_args(OmitReason)


@dataclass(frozen=True)
class Omitted:
    """A file withheld from the engine, and why (one entry of ``runs.omitted``)."""

    path: str
    reason: OmitReason
    lines: int
    pattern: str | None = None  # the excluded_paths glob that matched

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"path": self.path, "reason": self.reason, "lines": self.lines}
        if self.pattern is not None:
            out["pattern"] = self.pattern
        return out


@dataclass(frozen=True)
class Coverage:
    """What a run read of its pull request: ``reviewed`` of ``files`` changed files, in
    ``parts`` calls, with ``pruned`` naming what was cut from the diff to fit."""

    files: int
    reviewed: int
    parts: int = 1
    pruned: tuple[str, ...] = ()


def encode_coverage(coverage: Coverage | None) -> str | None:
    """``runs.coverage``."""
    if coverage is None:
        return None
    return dump({"files": coverage.files, "reviewed": coverage.reviewed,
                 "parts": coverage.parts, "pruned": list(coverage.pruned)})


def parse_coverage(text: object) -> Coverage | None:
    data = _loads(text, "coverage")
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("runs.coverage is not a JSON object")
    counts = [data.get(k) for k in ("files", "reviewed", "parts")]
    pruned = data.get("pruned", [])
    if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts) \
            or not isinstance(pruned, list) or not all(isinstance(p, str) for p in pruned):
        raise ValueError("runs.coverage: counts must be integers, pruned a list of text")
    return Coverage(files=data["files"], reviewed=data["reviewed"], parts=data["parts"],
                    pruned=tuple(pruned))


# -- encoding ----------------------------------------------------------------------------

def finding_json(finding: Finding) -> dict[str, object]:
    out: dict[str, object] = {
        "path": finding.path, "line": finding.line, "side": finding.side,
        "start_line": finding.start_line, "severity": finding.severity,
        "category": finding.category, "title": finding.title, "body": finding.body}
    if finding.suggestion is not None:
        out["suggestion"] = finding.suggestion
    if finding.fingerprint is not None:
        out["fingerprint"] = finding.fingerprint
    return out


def assessment_json(assessment: Assessment) -> dict[str, object]:
    return {"summary": assessment.summary, "risk": assessment.risk}


def description_json(description: Description) -> dict[str, object]:
    return {"title": description.title, "summary": description.summary,
            "changes": list(description.changes)}


def dump(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def encode_findings(findings: Sequence[Finding]) -> str:
    """``runs.findings``."""
    return dump([finding_json(f) for f in findings])


def encode_omitted(omitted: Sequence[Omitted]) -> str:
    """``runs.omitted``."""
    return dump([o.as_json() for o in omitted])


def encode_assessment(assessment: Assessment | None) -> str | None:
    """``runs.assessment`` (NULL when there is none)."""
    return None if assessment is None else dump(assessment_json(assessment))


def encode_description(description: Description | None) -> str | None:
    """``runs.description`` (NULL for a review)."""
    return None if description is None else dump(description_json(description))


@dataclass(frozen=True)
class AskAnswer:
    """What an ``ask`` run leaves to post: the ``question`` as asked, the answer's
    ``text`` (None: the run produced none) and the review thread it goes in (``reply_to``,
    the thread's root comment; None: the pull request's conversation)."""

    question: str
    text: str | None = None
    reply_to: int | None = None


def encode_answer(answer: AskAnswer | None) -> str | None:
    """``runs.answer`` (NULL for a review or a description)."""
    if answer is None:
        return None
    return dump({"question": answer.question, "text": answer.text,
                 "reply_to": answer.reply_to})


# -- decoding ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Fixed:
    """An earlier finding the engine said no longer holds: its thread is to be resolved."""

    fingerprint: str
    thread_id: str


def encode_fixed(fixed: Sequence[Fixed]) -> str | None:
    if not fixed:
        return None
    return dump([{"fingerprint": f.fingerprint, "thread_id": f.thread_id} for f in fixed])


def parse_fixed(text: object) -> tuple[Fixed, ...]:
    data = _loads(text, "fixed")
    if data is None:
        return ()
    if not isinstance(data, list):
        raise ValueError("runs.fixed is not a JSON array")
    out = []
    for item in data:
        if not (isinstance(item, Mapping) and isinstance(item.get("fingerprint"), str)
                and isinstance(item.get("thread_id"), str)):
            raise ValueError("runs.fixed: an entry is not {fingerprint, thread_id}")
        out.append(Fixed(fingerprint=item["fingerprint"], thread_id=item["thread_id"]))
    return tuple(out)


def _loads(text: object, what: str) -> Any:
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"runs.{what} is not text")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"runs.{what} is not valid JSON: {exc.msg}") from exc


def _optional_text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected text, got {type(value).__name__}")


def parse_findings(text: object) -> tuple[Finding, ...]:
    """``runs.findings`` as ``Finding`` objects (ValueError when malformed)."""
    data = _loads(text, "findings")
    if not isinstance(data, list):
        raise ValueError("runs.findings is not a JSON array")
    out: list[Finding] = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise ValueError(f"runs.findings[{i}] is not an object")
        try:
            out.append(Finding(
                path=item["path"], line=item["line"], side=item["side"],
                start_line=item.get("start_line"), severity=item["severity"],
                category=item["category"], title=item["title"], body=item["body"],
                suggestion=_optional_text(item.get("suggestion")),
                fingerprint=_optional_text(item.get("fingerprint"))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"runs.findings[{i}]: {exc}") from exc
    return tuple(out)


def parse_assessment(text: object) -> Assessment | None:
    data = _loads(text, "assessment")
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("runs.assessment is not a JSON object")
    try:
        return Assessment(summary=data["summary"], risk=data["risk"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"runs.assessment: {exc}") from exc


def parse_description(text: object) -> Description | None:
    data = _loads(text, "description")
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("runs.description is not a JSON object")
    try:
        changes = data.get("changes", [])
        if not isinstance(changes, list):
            raise TypeError("changes is not a list")
        return Description(title=data["title"], summary=data["summary"],
                           changes=tuple(changes))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"runs.description: {exc}") from exc


def parse_answer(text: object) -> AskAnswer | None:
    data = _loads(text, "answer")
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError("runs.answer is not a JSON object")
    question, said, reply_to = data.get("question"), data.get("text"), data.get("reply_to")
    if not isinstance(question, str) or not (said is None or isinstance(said, str)) or not (
            reply_to is None or (isinstance(reply_to, int) and not isinstance(reply_to, bool))):
        raise ValueError("runs.answer: expected question (text), text (text or null) and "
                         "reply_to (an id or null)")
    return AskAnswer(question=question, text=said, reply_to=reply_to)


def parse_omitted(text: object) -> tuple[Omitted, ...]:
    data = _loads(text, "omitted") or []
    if not isinstance(data, list):
        raise ValueError("runs.omitted is not a JSON array")
    out: list[Omitted] = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping) or not isinstance(item.get("path"), str):
            raise ValueError(f"runs.omitted[{i}] is not an object with a path")
        reason = item.get("reason")
        if reason not in OMIT_REASONS:
            raise ValueError(f"runs.omitted[{i}].reason must be one of {OMIT_REASONS}")
        why = cast(OmitReason, reason)
        lines = item.get("lines", 0)
        pattern = item.get("pattern")
        out.append(Omitted(path=item["path"], reason=why,
                           lines=lines if isinstance(lines, int) else 0,
                           pattern=pattern if isinstance(pattern, str) else None))
    return tuple(out)
