"""The answer a model must give: its JSON schema, validation, and mapping onto the diff.

Pure: no I/O. A model's answer is untrusted output, so it is parsed defensively
(``extract_json`` finds the object in prose or a ```json fence), validated field by
field against the same schema the prompt shows (``parse_answer``, which raises
``InvalidAnswer`` with a path-like reason the repair prompt can quote), and only then
turned into ``Finding``/``Assessment``/``Description`` values. Which of them may be posted
inline is hunks.py's to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from service.engine.base import (
    ANSWER_MAX_CHARS,
    BODY_MAX_CHARS,
    CATEGORIES,
    REDUCED_CATEGORIES,
    RISKS,
    SIDES,
    SUGGESTION_MAX_CHARS,
    TITLE_MAX_CHARS,
    Assessment,
    Command,
    Description,
    Finding,
    ReviewMode,
)
from service.model.severity import SEVERITIES

#: A review proposing more than this is noise; the extra findings are dropped.
MAX_FINDINGS: Final = 50
#: Most earlier findings a request asks the engine to re-check (``EngineRequest.earlier``).
MAX_EARLIER: Final = 20
MAX_CHANGES: Final = 30
SUMMARY_MAX_CHARS: Final = 4000


class InvalidAnswer(ValueError):
    """The model's answer is not a JSON object matching the schema. ``str()`` is a short
    reason naming the offending field, safe to show the model in a repair prompt."""


def review_schema(mode: ReviewMode) -> dict[str, Any]:
    """The JSON Schema of a review answer; ``reduced`` narrows the categories."""
    categories = list(REDUCED_CATEGORIES if mode == "reduced" else CATEGORIES)
    finding = {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "line", "side", "severity", "category", "title", "body"],
        "properties": {
            "path": {"type": "string", "description": "file path as in the diff, no a/ or b/"},
            "line": {"type": "integer", "minimum": 1,
                     "description": "line number in the file on `side` (last line of a range)"},
            "side": {"type": "string", "enum": list(SIDES),
                     "description": "RIGHT = the new version (added/context lines), "
                                    "LEFT = the old version (removed lines)"},
            "start_line": {"type": ["integer", "null"], "minimum": 1,
                           "description": "first line of a multi-line range, or null"},
            "severity": {"type": "string", "enum": list(SEVERITIES)},
            "category": {"type": "string", "enum": categories},
            "title": {"type": "string", "maxLength": TITLE_MAX_CHARS},
            "body": {"type": "string", "maxLength": BODY_MAX_CHARS},
            "suggestion": {"type": ["string", "null"], "maxLength": SUGGESTION_MAX_CHARS,
                           "description": "optional: the exact replacement for lines "
                                          "start_line..line (or line) of the new version "
                                          "(side RIGHT), with their indentation; omit or "
                                          "null when there is no concrete fix"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["summary", "risk", "findings"],
        "properties": {
            "summary": {"type": "string", "maxLength": SUMMARY_MAX_CHARS,
                        "description": "what the change does and the overall verdict"},
            "risk": {"type": "string", "enum": list(RISKS)},
            "findings": {"type": "array", "maxItems": MAX_FINDINGS, "items": finding},
            "fixed": {"type": "array", "maxItems": MAX_EARLIER,
                      "items": {"type": "string", "pattern": "^E[0-9]{1,3}$"},
                      "description": "optional: the refs (E1, ...) of the earlier findings "
                                     "listed in <earlier_findings> that no longer hold"},
        },
    }


def describe_schema() -> dict[str, Any]:
    """The JSON Schema of a ``describe`` answer."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["title", "summary", "changes"],
        "properties": {
            "title": {"type": "string", "maxLength": TITLE_MAX_CHARS},
            "summary": {"type": "string", "maxLength": SUMMARY_MAX_CHARS},
            "changes": {"type": "array", "maxItems": MAX_CHANGES, "items": {"type": "string"}},
        },
    }


def ask_schema() -> dict[str, Any]:
    """The JSON Schema of the answer to a question."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["answer"],
        "properties": {
            "answer": {"type": "string", "maxLength": ANSWER_MAX_CHARS,
                       "description": "the answer, in GitHub Markdown"},
        },
    }


def schema_for(command: Command, mode: ReviewMode) -> dict[str, Any]:
    """The schema the answer to ``command`` must match."""
    if command == "ask":
        return ask_schema()
    return review_schema(mode) if command == "review" else describe_schema()


@dataclass(frozen=True)
class Answer:
    """A validated answer: findings + assessment for a review, a description otherwise."""

    findings: tuple[Finding, ...] = ()
    assessment: Assessment | None = None
    description: Description | None = None
    answer: str | None = None  # to a question (``ask``)
    fixed: tuple[str, ...] = ()  # refs of earlier findings that no longer hold
    dropped: int = 0  # findings beyond MAX_FINDINGS or outside a reduced review's categories


_REF = re.compile(r"E[0-9]{1,3}")
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)\n?```", re.DOTALL)


_THINKING = re.compile(r"^\s*<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)


def extract_json(text: str) -> Any:
    """The JSON value in a model's final text: the whole text, else the last fenced
    block that parses, else the span from the first ``{`` to the last ``}``.

    Raises ``InvalidAnswer`` when none of these parse.
    """
    # A model served without a reasoning parser thinks aloud first: <think>…</think>.
    text = _THINKING.sub("", text)
    stripped = text.strip()
    if not stripped:
        raise InvalidAnswer("the answer is empty; expected one JSON object")
    candidates = [stripped]
    candidates += reversed([m.group(1) for m in _FENCE.finditer(text)])
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: absurdly deep nesting
            continue
    raise InvalidAnswer("the answer contains no parseable JSON object")


def parse_answer(command: Command, mode: ReviewMode, value: Any) -> Answer:
    """Validate ``value`` (already decoded JSON) for ``command``; raise ``InvalidAnswer``."""
    if not isinstance(value, dict):
        raise InvalidAnswer(f"the answer must be a JSON object, got {_kind(value)}")
    if command == "describe":
        return _parse_description(value)
    if command == "ask":
        _only_keys(value, ("answer",), "")
        return Answer(answer=_text(value, "answer", "", ANSWER_MAX_CHARS))
    return _parse_review(mode, value)


def parse_answer_text(command: Command, mode: ReviewMode, text: str) -> Answer:
    """``extract_json`` then ``parse_answer``."""
    return parse_answer(command, mode, extract_json(text))


def _parse_review(mode: ReviewMode, value: Mapping[str, Any]) -> Answer:
    _only_keys(value, ("summary", "risk", "findings", "fixed"), "")
    summary = _text(value, "summary", "", SUMMARY_MAX_CHARS)
    risk = _choice(value, "risk", "", RISKS)
    raw = value.get("findings")
    if not isinstance(raw, list):
        raise InvalidAnswer(f"findings: must be an array, got {_kind(raw)}")
    allowed = REDUCED_CATEGORIES if mode == "reduced" else CATEGORIES
    findings: list[Finding] = []
    dropped = 0
    for index, item in enumerate(raw):
        finding = _parse_finding(item, f"findings[{index}].")
        if finding.category not in allowed or len(findings) >= MAX_FINDINGS:
            dropped += 1
            continue
        findings.append(finding)
    return Answer(findings=tuple(findings),
                  assessment=Assessment(summary=summary, risk=risk),  # type: ignore[arg-type]
                  fixed=_fixed(value.get("fixed")), dropped=dropped)


def _fixed(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > MAX_EARLIER:
        raise InvalidAnswer(f"fixed: must be an array of at most {MAX_EARLIER} refs")
    refs = []
    for index, item in enumerate(raw):
        if not isinstance(item, str) or not _REF.fullmatch(item):
            raise InvalidAnswer(f"fixed[{index}]: must be a ref such as E1")
        if item not in refs:
            refs.append(item)
    return tuple(refs)


def _parse_finding(item: Any, where: str) -> Finding:
    if not isinstance(item, dict):
        raise InvalidAnswer(f"{where.rstrip('.')}: must be an object, got {_kind(item)}")
    _only_keys(item, ("path", "line", "side", "start_line", "severity", "category",
                      "title", "body", "suggestion"), where)
    path = _text(item, "path", where, 1000)
    path = path.removeprefix("./")
    if path.startswith(("a/", "b/")) and len(path) > 2:
        path = path[2:]
    if path.startswith("/"):
        raise InvalidAnswer(f"{where}path: must be relative to the repository root")
    line = _int(item, "line", where)
    start = item.get("start_line")
    if start is not None:
        start = _int(item, "start_line", where)
        if start > line:
            raise InvalidAnswer(f"{where}start_line: must not be greater than line")
        if start == line:
            start = None
    return Finding(
        path=path, line=line, side=_choice(item, "side", where, SIDES),  # type: ignore[arg-type]
        start_line=start,
        severity=_choice(item, "severity", where, SEVERITIES),  # type: ignore[arg-type]
        category=_choice(item, "category", where, CATEGORIES),  # type: ignore[arg-type]
        title=_text(item, "title", where, TITLE_MAX_CHARS),
        body=_text(item, "body", where, BODY_MAX_CHARS),
        suggestion=_suggestion(item, where),
    )


def _suggestion(item: Mapping[str, Any], where: str) -> str | None:
    """The proposed replacement code: only on the new version (``RIGHT``), never cut (a
    cut suggestion would commit broken code), so one over the limit is not offered."""
    raw = item.get("suggestion")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InvalidAnswer(f"{where}suggestion: must be a string or null, got {_kind(raw)}")
    if item.get("side") != "RIGHT" or len(raw) > SUGGESTION_MAX_CHARS:
        return None
    return raw.replace("\r\n", "\n").rstrip("\n")


def _parse_description(value: Mapping[str, Any]) -> Answer:
    _only_keys(value, ("title", "summary", "changes"), "")
    raw = value.get("changes")
    if not isinstance(raw, list):
        raise InvalidAnswer(f"changes: must be an array of strings, got {_kind(raw)}")
    changes: list[str] = []
    for index, item in enumerate(raw[:MAX_CHANGES]):
        if not isinstance(item, str) or not item.strip():
            raise InvalidAnswer(f"changes[{index}]: must be a non-empty string")
        changes.append(item.strip()[:TITLE_MAX_CHARS * 2])
    return Answer(description=Description(
        title=_text(value, "title", "", TITLE_MAX_CHARS),
        summary=_text(value, "summary", "", SUMMARY_MAX_CHARS),
        changes=tuple(changes),
    ))


def _only_keys(value: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    extra = sorted(set(value) - set(allowed))
    if extra:
        raise InvalidAnswer(f"{where}{extra[0]}: unexpected field (allowed: {', '.join(allowed)})")


def _text(value: Mapping[str, Any], key: str, where: str, limit: int) -> str:
    raw = value.get(key)
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidAnswer(f"{where}{key}: must be a non-empty string, got {_kind(raw)}")
    text = raw.strip()
    # Over-long text is cut, not rejected: a repair round trip for verbosity wastes tokens.
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _int(value: Mapping[str, Any], key: str, where: str) -> int:
    raw = value.get(key)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise InvalidAnswer(f"{where}{key}: must be a positive integer, got {_kind(raw)}")
    return raw


def _choice(value: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...]) -> str:
    raw = value.get(key)
    if isinstance(raw, str) and raw.strip().lower() in {c.lower() for c in choices}:
        return next(c for c in choices if c.lower() == raw.strip().lower())
    raise InvalidAnswer(f"{where}{key}: must be one of {', '.join(choices)}, got {_kind(raw)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null or nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return f"the string {json.dumps(value[:40])}"
    return "an array" if isinstance(value, list) else "an object"

