"""What the App posts, composed from a ``Publication`` (pure: no I/O, no clock).

Every body starts with the run's hidden marker (``markers.run_marker``), so a retry can
find a post that GitHub accepted but the store never recorded. Every piece of text that
came from the pull request or the model goes through ``safety.clean``; every finished body
is neutralised again and kept within GitHub's 65,536-character limit. When findings do not
fit, the body degrades instead of failing: whole findings first (most severe first), then
one line per finding, then a count — always with a note saying so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from service.config.redact import redact_shapes
from service.engine.base import Finding
from service.intake.rules.mention import neutralise
from service.publish import coverage
from service.publish.markers import OUTDATED, run_marker
from service.publish.memory import repeated_line
from service.publish.publication import Publication
from service.publish.safety import MAX_BODY, clean, clean_line, code, github_length, truncate
from service.publish.thresholds import not_shown_line

_SEVERITY_RANK: Final = {"critical": 0, "major": 1, "minor": 2, "nit": 3}
#: Withheld paths listed by name; beyond this they are counted.
MAX_WITHHELD_LISTED: Final = 50
#: Longest a single finding's text may be in a body or an inline comment.
MAX_FINDING_CHARS: Final = 12_000
#: Room kept for the notes a degraded body adds.
_NOTE_ROOM: Final = 600
SIZE_NOTE: Final = "_(Cut here: GitHub limits a post to 65,536 characters.)_"

#: Plain words for why a run produced nothing to post.
FAILURE_REASONS: Final = {
    "timeout": "the run reached its time limit",
    "engine_error": "the review engine failed",
    "engine_unavailable": "the review engine could not be started",
    "usage_limit": "the model's plan reported that its usage limit was reached",
    "refused": "the model declined to review this change",
    "failed": "the run failed",
    "truncated": "the run stopped before it finished",
    "infrastructure": "the run was interrupted",
    "lost": "the run was interrupted",
}


@dataclass(frozen=True)
class Asker:
    """The person who wrote the mention: their login and a link to their comment."""

    login: str
    url: str | None = None


@dataclass(frozen=True)
class ReviewPost:
    """A ``POST /pulls/{n}/reviews`` request, without its commit."""

    body: str
    comments: tuple[dict[str, object], ...]

    def payload(self, commit_id: str) -> dict[str, object]:
        """The request body: ``event: COMMENT`` pinned to ``commit_id``."""
        out: dict[str, object] = {"commit_id": commit_id, "event": "COMMENT", "body": self.body}
        if self.comments:
            out["comments"] = list(self.comments)
        return out


def short(sha: str) -> str:
    return sha[:12]


def finish(parts: Sequence[str], phrase: str) -> str:
    """``parts`` joined into one body: neutralised, within GitHub's limit."""
    body = neutralise("\n\n".join(p for p in parts if p), phrase)
    return truncate(body, MAX_BODY, SIZE_NOTE)


# -- pieces ------------------------------------------------------------------------------


def account_line(pub: Publication, phrase: str) -> str:
    """The one-line account of the run: tokens and how exact, engine, model, rung."""
    acc = pub.account
    if acc.tokens is None or acc.confidence in (None, "unavailable"):
        tokens = ("tokens not measured; the whole reservation of "
                  f"{acc.reserved:,} tokens was charged")
    else:
        how = "exact count" if acc.confidence == "exact" else str(acc.confidence)
        tokens = f"{acc.tokens:,} tokens ({how})"
    parts = [f"Run: {tokens}"]
    if acc.engine:
        parts.append(f"engine {code(clean_line(acc.engine, phrase)[:100])}")
    if acc.model:
        parts.append(f"model {code(clean_line(acc.model, phrase)[:100])}")
    parts.append("answer" if pub.is_ask else "reduced review" if acc.reduced
                 else "full review")
    if acc.stop_reason and acc.stop_reason != "completed":
        parts.append(f"stopped: {acc.stop_reason}")
    return "<sub>" + " · ".join(parts) + "</sub>"


def _where(finding: Finding) -> str:
    lines = (f"lines {finding.start_line}–{finding.line}"
             if finding.start_line is not None and finding.start_line < finding.line
             else f"line {finding.line}")
    side = "" if finding.side == "RIGHT" else " (old version)"
    return f"{lines}{side}"


def _heading(finding: Finding, phrase: str, number: int | None = None) -> str:
    label = f"{number}. " if number is not None else ""
    return (f"**{label}[{finding.severity} · {finding.category}] "
            f"{clean_line(finding.title, phrase)}**")


def _finding_text(finding: Finding, phrase: str) -> str:
    return truncate(clean(finding.body, phrase), MAX_FINDING_CHARS, SIZE_NOTE)


def suggestion_block(finding: Finding, phrase: str, *, committable: bool) -> str:
    """The finding's replacement code: a ```` ```suggestion ```` block GitHub offers to
    commit (``committable``: the comment is anchored on the lines it replaces), else a
    plain code block saying which lines it would replace. The fence is longer than any
    backtick run inside; the trigger phrase is neutralised and token shapes redacted, and
    nothing else is touched (it is code)."""
    text = neutralise(redact_shapes(finding.suggestion or "")[0], phrase)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    if committable:
        return f"{fence}suggestion\n{text}\n{fence}"
    lines = (f"line {finding.line}" if finding.start_line is None
             else f"lines {finding.start_line}–{finding.line}")
    return f"Suggested replacement for {lines}:\n\n{fence}\n{text}\n{fence}"


def inline_comment(finding: Finding, phrase: str) -> dict[str, object]:
    """One review comment on the diff; multi-line only when ``start_line`` precedes
    ``line`` (GitHub refuses a start line equal to the line). A finding that proposes
    replacement code carries it as a committable suggestion (an inline finding's lines lie
    in one hunk: ``hunks.is_inline``)."""
    body = neutralise(f"{_heading(finding, phrase)}\n\n{_finding_text(finding, phrase)}",
                      phrase)
    if finding.suggestion is not None and finding.side == "RIGHT":
        body += "\n\n" + suggestion_block(finding, phrase, committable=True)
    out: dict[str, object] = {"path": finding.path, "line": finding.line,
                              "side": finding.side, "body": truncate(body, MAX_BODY, SIZE_NOTE)}
    if finding.start_line is not None and finding.start_line < finding.line:
        out["start_line"] = finding.start_line
        out["start_side"] = finding.side
    return out


def _full_entry(n: int, finding: Finding, phrase: str) -> str:
    entry = (f"{_heading(finding, phrase, n)}  \n"
             f"{code(clean_line(finding.path, phrase)[:300])}, {_where(finding)}\n\n"
             f"{_finding_text(finding, phrase)}")
    if finding.suggestion is not None:
        # Not anchored on the diff: shown as text, never offered to commit.
        entry += "\n\n" + suggestion_block(finding, phrase, committable=False)
    return entry


def _compact_entry(n: int, finding: Finding, phrase: str) -> str:
    return (f"- {n}. **[{finding.severity}]** {clean_line(finding.title, phrase)} — "
            f"{code(clean_line(finding.path, phrase)[:300])}, {_where(finding)}")


def findings_section(findings: Sequence[Finding], heading: str, phrase: str,
                     room: int) -> str:
    """The findings as Markdown within ``room`` characters: whole, then one line each,
    then a count, most severe first."""
    if not findings:
        return ""
    ordered = sorted(findings, key=lambda f: _SEVERITY_RANK.get(f.severity, 9))
    out = [f"#### {heading} ({len(ordered)})"]
    used = github_length(out[0]) + _NOTE_ROOM
    whole = 0
    while whole < len(ordered):
        entry = _full_entry(whole + 1, ordered[whole], phrase)
        if used + github_length(entry) + 2 > room:
            break
        out.append(entry)
        used += github_length(entry) + 2
        whole += 1
    if whole == len(ordered):
        return "\n\n".join(out)
    compact: list[str] = []
    for n in range(whole, len(ordered)):
        line = _compact_entry(n + 1, ordered[n], phrase)
        if used + github_length(line) + 1 > room:
            break
        compact.append(line)
        used += github_length(line) + 1
    rest = len(ordered) - whole
    note = (f"_{rest} more finding(s) are listed by title only: the review reached "
            "GitHub's 65,536-character limit._")
    if len(compact) < rest:
        note += f" _{rest - len(compact)} did not fit at all and are not shown._"
    out.append(note)
    if compact:
        out.append("\n".join(compact))
    return "\n\n".join(out)


def withheld_section(pub: Publication, phrase: str) -> str:
    """The paths that excluded_paths or the line cap kept from the engine."""
    if not pub.omitted:
        return ""
    lines = [f"#### Not reviewed ({len(pub.omitted)})"]
    for item in pub.omitted[:MAX_WITHHELD_LISTED]:
        path = code(clean_line(item.path, phrase)[:300])
        if item.reason == "excluded":
            why = ("matches " + code(clean_line(item.pattern, phrase)[:200])
                   if item.pattern else "matches review.excluded_paths")
        elif item.reason == "max_diff_lines":
            why = f"{item.lines:,} lines, over review.max_diff_lines"
        else:
            why = f"{item.lines:,} lines, {coverage.WHY[item.reason]}"
        lines.append(f"- {path} — {why}")
    if len(pub.omitted) > MAX_WITHHELD_LISTED:
        lines.append(f"- … and {len(pub.omitted) - MAX_WITHHELD_LISTED} more")
    return "\n".join(lines)


def _notes(pub: Publication) -> list[str]:
    notes: list[str] = []
    if pub.account.reduced:
        notes.append("> **Reduced review.** The token budget is past 60 % of a window, so "
                     "this run looked for correctness and security problems only.")
    said = coverage.sentence(pub.coverage, pub.omitted)
    if said is not None and pub.partial:
        notes.append(f"> **Partial review.** {said}")
    elif said is not None:
        notes.append(said)
    if pub.outcome == "truncated" and pub.account.stop_reason not in (None, "completed",
                                                                       "refused"):
        notes.append("> **Stopped early.** The run stopped before it finished; the "
                     "findings are what it had found by then.")
    if pub.account.reviewed_since:
        notes.append(f"Reviewed the changes since {code(short(pub.account.reviewed_since))} "
                     "(an incremental review: earlier commits were reviewed before).")
    return notes


def _summary(pub: Publication, phrase: str, *, inline_count: int) -> str:
    if pub.assessment is not None:
        text = f"**Risk: {pub.assessment.risk}.** {clean(pub.assessment.summary, phrase)}"
    elif pub.outcome != "failed" and not pub.findings:
        text = ("Nothing was reviewed: no changed file was read (each is listed below "
                "with why)." if pub.omitted else "Nothing to review: the change is empty.")
    else:
        text = ""
    if inline_count:
        text += f"\n\n{inline_count} finding(s) are comments on the diff."
    elif (pub.assessment is not None and not pub.findings and not pub.not_shown
          and not pub.repeated):
        text += "\n\nNo findings."
    for line in (repeated_line(pub), not_shown_line(pub)):
        if line:
            text += f"\n\n{line}"
    return text.strip()


def _review_body(pub: Publication, head: Sequence[str], findings: Sequence[Finding],
                 heading: str, phrase: str, *, inline_count: int) -> str:
    fixed = [run_marker(pub.dedupe_key), *head, *_notes(pub),
             _summary(pub, phrase, inline_count=inline_count)]
    tail = [withheld_section(pub, phrase), account_line(pub, phrase)]
    used = sum(github_length(p) + 2 for p in (*fixed, *tail) if p)
    section = findings_section(findings, heading, phrase, max(0, MAX_BODY - used))
    return finish([*fixed, section, *tail], phrase)


# -- what is posted ----------------------------------------------------------------------


def review(pub: Publication, inline: Sequence[Finding], body_only: Sequence[Finding], *,
           phrase: str, fallback: bool = False, config_notes: Sequence[str] = ()
           ) -> ReviewPost:
    """The review: ``inline`` findings as comments on the diff, ``body_only`` in the body.

    ``fallback`` is the second post after GitHub refused an anchor (422): every finding
    is in the body and the body says why. ``config_notes`` are the repository config's
    problems, named in the answer to a person who asked.
    """
    head = [f"**Review** of {code(short(pub.head_sha))}"]
    if config_notes:
        head.append("**The repository's config was not fully applied:**\n" + "\n".join(
            f"- {clean_line(note, phrase)}" for note in config_notes[:20]))
    heading = "Findings not placed on the diff"
    if fallback:
        head.append("GitHub did not accept the inline comments for this commit, so every "
                    "finding is listed here.")
        heading = "Findings"
    body = _review_body(pub, head, body_only, heading, phrase, inline_count=len(inline))
    return ReviewPost(body=body, comments=tuple(inline_comment(f, phrase) for f in inline))


def _description_parts(pub: Publication, phrase: str) -> list[str]:
    desc = pub.description
    if desc is None:
        return ["No description was produced."]
    parts = [f"**{clean_line(desc.title, phrase)}**", clean(desc.summary, phrase)]
    if desc.changes:
        parts.append("**Changes**\n" + "\n".join(
            f"- {clean_line(change, phrase)}" for change in desc.changes))
    return parts


def description_comment(pub: Publication, *, phrase: str) -> str:
    """``@claude describe`` answered as a comment."""
    return finish([run_marker(pub.dedupe_key), "### Suggested description",
                    *_description_parts(pub, phrase), account_line(pub, phrase)], phrase)


def description_block(pub: Publication, *, phrase: str, limit: int = MAX_BODY) -> str:
    """What goes between the description's start and end lines in the pull request body
    (the run marker first, so a retry finds it there)."""
    body = neutralise("\n\n".join([
        run_marker(pub.dedupe_key),
        f"### Description (by the review agent, for {code(short(pub.head_sha))})",
        *_description_parts(pub, phrase), account_line(pub, phrase)]), phrase)
    return truncate(body, limit, SIZE_NOTE)


def outdated_comment(pub: Publication, current_head: str, *, phrase: str) -> str:
    """A mention's result for a head that has moved on: posted as a plain comment, marked
    outdated, never as a review of the current code."""
    banner = (f"**Outdated.** This answers the request for {code(short(pub.head_sha))}; the "
              f"pull request has moved on to {code(short(current_head))} since, so it is "
              "posted as a comment, not as a review of the current code. Ask again for the "
              "current head.")
    if pub.is_describe:
        return finish([run_marker(pub.dedupe_key), OUTDATED, banner,
                        "### Suggested description", *_description_parts(pub, phrase),
                        account_line(pub, phrase)], phrase)
    return _review_body(pub, [OUTDATED, banner], pub.findings, "Findings", phrase,
                        inline_count=0)


def address(asker: Asker | None) -> str:
    """``@login, `` for a known asker, else nothing."""
    return f"@{asker.login}, " if asker is not None else ""


def their_request(asker: Asker | None) -> str:
    if asker is not None and asker.url:
        return f"[your request]({asker.url})"
    return "the request"


def failure_comment(pub: Publication, asker: Asker | None, *, phrase: str) -> str:
    """A mention whose run produced nothing to post: why, to the person who asked."""
    what = "answer" if pub.is_ask else "description" if pub.is_describe else "review"
    reason = FAILURE_REASONS.get(pub.account.stop_reason or "failed", "the run failed")
    if pub.coverage is not None and pub.coverage.reviewed == 0 and pub.omitted:
        reason = "no changed file was read (" + coverage.breakdown(pub.omitted) + ")"
    text = (f"{address(asker)}I could not finish the {what} for {their_request(asker)} "
            f"of {code(short(pub.head_sha))}: {reason}. Nothing else was posted; asking "
            "again will start a new run.")
    return finish([run_marker(pub.dedupe_key), text, account_line(pub, phrase)], phrase)
