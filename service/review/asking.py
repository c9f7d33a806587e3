"""An ``ask`` job's own steps: the question read from GitHub with what it is about, and
its one call of the engine planned (docs/TRIGGERS.md#questions-ask).

The question is the asking comment, read when the job runs (a deleted one is not
answered). A question written in a review thread is about that thread: its first
comment (a finding of the App's, when it is one), the lines it points at and the
replies before the question go with it, and the answer goes back into the thread. Every
question also carries the review's open findings, one line each.

An answer is one call: the diff is fitted to the window and the answer's reservation
like a review's (``calls.plan``), but only the first part is sent; the rest is listed as
unread, and the answer says what it read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from service.config.posting import AskConfig
from service.engine.base import Question
from service.github.client import GitHubClient
from service.github.errors import NotFound
from service.publish.run_content import Omitted
from service.review.calls import CallPlan
from service.review.packing import Packing
from service.storage import posted_findings
from service.storage.posted_findings import Known as PostedFinding
from service.storage.queue import Claim

#: An open finding as the question's context names it: its first line, cut to this.
FINDING_LINE_CHARS: Final = 200
#: Replies of a thread kept before the question (the finding itself always is).
THREAD_REPLIES: Final = 20


@dataclass(frozen=True)
class Asked:
    """The question as the job read it: the engine's ``Question``, and the review
    thread the answer goes into (its root comment; None: the conversation)."""

    question: Question
    reply_to: int | None


async def read_question(github: GitHubClient, installation: int, claim: Claim,
                        posted: Sequence[PostedFinding], config: AskConfig) -> Asked | None:
    """The question ``claim`` was asked with, and its context; None when the comment is
    gone (deleted before the job ran)."""
    job = claim.job
    assert job.comment_id is not None
    repo, number = job.repo, job.pr_number
    # The pull request's review comments hold the thread and the findings' words: read
    # once, and only when there is a thread or an open finding to read.
    wanted = job.comment_source == "review" or any(
        k.state == posted_findings.OPEN for k in posted)
    listed = [c async for c in github.paginate(installation,
                                               f"/repos/{repo}/pulls/{number}/comments")
              if isinstance(c, Mapping) and isinstance(c.get("id"), int)] if wanted else []
    by_id = {int(c["id"]): c for c in listed}
    kind = "pulls" if job.comment_source == "review" else "issues"
    asking: Mapping[str, Any] | None = by_id.get(job.comment_id)
    if asking is None:
        try:
            asking = await github.get_json(installation,
                                           f"/repos/{repo}/{kind}/comments/{job.comment_id}")
        except NotFound:
            return None
    if not isinstance(asking, Mapping):
        return None
    findings = tuple(_finding_line(k, by_id.get(k.comment_id)) for k in posted
                     if k.state == posted_findings.OPEN)
    question = Question(text=_text(asking.get("body")), asker=_login(asking),
                        max_chars=config.max_answer_chars, findings=findings)
    if job.comment_source != "review":
        return Asked(question, None)
    root_id = asking.get("in_reply_to_id")
    root = by_id.get(root_id) if isinstance(root_id, int) else asking
    if root is None:  # the thread's first comment is gone: answer in the conversation
        return Asked(question, None)
    replies = sorted((c for c in listed if c.get("in_reply_to_id") == root["id"]
                      and int(c["id"]) < job.comment_id), key=lambda c: int(c["id"]))
    earlier = ([root] if root is not asking else []) + replies[-THREAD_REPLIES:]
    lines = f"{_text(root.get('path'))}:{root.get('line') or root.get('original_line')}\n" \
            f"{_text(root.get('diff_hunk'))}"
    question = replace(question, lines=lines,
                       thread=tuple((_login(c), _text(c.get("body"))) for c in earlier))
    return Asked(question, int(root["id"]))


def one_call(planned: CallPlan) -> CallPlan:
    """``planned`` cut to its first call: an answer is one call of the engine. The other
    parts' files are listed as unread, over what the answer could read."""
    parts = planned.packing.parts
    if len(parts) <= 1:
        return replace(planned, estimate=sum(planned.prices) + planned.answer * len(parts),
                       fitted=False)
    unread = tuple(Omitted(f.path, "max_run_tokens", f.lines) for p in parts[1:] for f in p)
    packing = Packing(parts[:1], planned.packing.omitted + unread, planned.packing.pruned)
    return CallPlan(packing, planned.prices[:1], planned.answer,
                    planned.prices[0] + planned.answer)


def _finding_line(known: PostedFinding, comment: Mapping[str, Any] | None) -> str:
    said = _text(None if comment is None else comment.get("body")).strip().splitlines()
    first = next((line for line in said if line.strip()), "(its comment is gone)")
    return (f"{known.path}:{known.line} [{known.severity}, {known.category}] "
            f"{first[:FINDING_LINE_CHARS]}")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _login(comment: Mapping[str, Any]) -> str:
    user = comment.get("user")
    login = user.get("login") if isinstance(user, Mapping) else None
    return login if isinstance(login, str) else "someone"
