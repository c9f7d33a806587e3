"""The text of a pull request's one summary comment (pure: no I/O, no clock).

The comment carries ``SUMMARY_MARKER`` as its first line, so a create whose answer was
lost is found again among the App's comments instead of being made twice. It says, from
the store's facts (``service.storage.summaries.Facts``): the latest review's overview,
the findings still open by severity, what became of each head the pull request was
reviewed at, and what its reviews cost so far. Everything that came from the model goes
through ``safety.clean``.
"""

from __future__ import annotations

from typing import Final

from service.publish.markers import PREFIX
from service.publish.run_content import parse_assessment
from service.publish.safety import MAX_BODY, clean, code, truncate
from service.storage.summaries import Facts, Head

SUMMARY_MARKER: Final = f"<!-- {PREFIX}:summary -->"
#: Heads listed one row each; older ones are counted above the table.
MAX_HEADS: Final = 30
_SEVERITIES: Final = ("critical", "major", "minor", "nit")
#: A trigger settled without a run: the worker declined it (the head had moved on, or the
#: repository's config turned the review off); its check run says which.
_NOT_RUN: Final = {"refused": "skipped (its check run says why)"}


def short(sha: str | None) -> str:
    return "—" if not sha else code(sha[:7])


def what_happened(head: Head) -> str:
    """One head's fate, in words."""
    if head.status == "pending":
        return "waiting (queued or deferred)"
    if head.status == "claimed":
        return "being reviewed"
    if head.status == "superseded":
        return "superseded by a newer head before it was reviewed"
    if head.status == "cancelled":
        return "cancelled: the pull request was closed"
    if head.status == "abandoned":
        why = f" ({head.stop_reason})" if head.stop_reason else ""
        return f"skipped after repeated failures{why}"
    if head.outcome is None:
        why = head.stop_reason or ""
        return _NOT_RUN.get(why, f"skipped ({why})" if why else "skipped")
    if head.outcome == "failed" or head.publish_outcome == "refused":
        what = "answered" if head.command == "ask" else "reviewed"
        return f"not {what}: {head.stop_reason or 'the run failed'}"
    if head.publish_outcome == "superseded":
        return "reviewed, but the head moved on before it was posted"
    if head.publish_outcome is None:
        return "reviewed, being posted"
    verb = {"describe": "described", "ask": "answered"}.get(head.command, "reviewed")
    if head.publish_outcome == "dry_run":
        verb += " (dry run, not posted)"
    if head.outcome == "truncated":
        verb += (f" ({head.files[0]:,} of {head.files[1]:,} files)" if head.files is not None
                 else " (partly)")
    if head.command == "review":
        verb += f", {head.posted} new finding(s)" if head.posted else ", nothing new"
    return verb


def _asked(head: Head) -> str:
    if head.kind == "mention":
        return f"asked ({head.command})"
    return "automatic"


def _open_line(facts: Facts) -> str:
    counts = dict(facts.open_findings)
    parts = [f"{counts[s]} {s}" for s in _SEVERITIES if counts.get(s)]
    parts += [f"{n} {s}" for s, n in facts.open_findings if s not in _SEVERITIES and n]
    return "**Open findings:** " + (" · ".join(parts) if parts else "none")


def _cost_line(facts: Facts) -> str:
    # Settled usage only: an open reservation is what a run in progress may spend at
    # most, not what it spent, so it is named apart (and never added in).
    running = ""
    if facts.in_progress:
        running = (f" In progress: {facts.in_progress} run(s), holding a reservation of "
                   f"{facts.reserved:,} tokens (not spent yet).")
    if not facts.runs:
        return "**Cost so far:** nothing yet." + running
    dollars = "" if facts.cost_usd is None else f" (${facts.cost_usd:.2f} as reported)"
    answers = sum(1 for h in facts.heads if h.command == "ask" and h.outcome is not None)
    among = f", {answers} of them answering a question" if answers else ""
    return (f"**Cost so far:** {facts.tokens:,} tokens over {facts.runs} "
            f"run(s){among}{dollars}.{running}")


def render(facts: Facts, *, phrase: str) -> str:
    """The whole comment, within GitHub's size limit."""
    parts = [SUMMARY_MARKER, "### Review summary"]
    if facts.overview is not None:
        sha, raw = facts.overview
        try:
            assessment = parse_assessment(raw)
        except ValueError:
            assessment = None
        if assessment is not None:
            parts.append(f"**Risk: {assessment.risk}** (at {short(sha)}). "
                         f"{clean(assessment.summary, phrase)}")
    parts.append(_open_line(facts))
    heads = facts.heads[-MAX_HEADS:]
    rows = ["| Head | Trigger | What happened |", "|---|---|---|"]
    rows += [f"| {short(h.head_sha)} | {_asked(h)} | {what_happened(h)} |" for h in heads]
    if len(facts.heads) > len(heads):
        parts.append(f"_{len(facts.heads) - len(heads)} earlier trigger(s) not listed._")
    parts.append("\n".join(rows))
    parts.append(_cost_line(facts))
    parts.append("<sub>This comment is edited in place after every review of this pull "
                 "request.</sub>")
    return truncate("\n\n".join(parts), MAX_BODY, "_(Cut: GitHub limits a comment's "
                    "length.)_")
