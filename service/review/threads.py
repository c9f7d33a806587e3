"""What the threads of the App's earlier findings say, before a review runs (pure rules).

A finding the App posted inline has a review thread. Before the next review of the pull
request the worker reads those threads (``service.github.threads``) and decides:

- **declined**: the pull request's author or a person allowed to ask (``triggers``'
  allowed associations and users) declined it — a 👎 on the App's comment, a reply that
  starts with one of ``review.decline_phrases`` (any case), or the thread resolved by a
  person while it is not outdated (its code stayed as it was). Its fingerprint is marked
  ``declined``: never raised again on this pull request, and the engine is told not to.
- **to check**: an open finding whose thread is outdated (its code changed since) is given
  to the engine, which says whether it still holds; the ones that no longer hold have
  their threads resolved by the publisher (``ThreadsView.earlier``).

A 👎 carries no association, so a reaction counts from the author, from a login in
``allowed_users``, or from someone whose own comment in these threads shows an allowed
association.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from service.config.schema import TriggersConfig
from service.engine.base import EarlierFinding, EngineResult
from service.engine.findings import MAX_EARLIER
from service.github.threads import Thread, ThreadComment
from service.intake.rules.allow import is_allowed_author
from service.intake.rules.decisions import starts_declining
from service.publish.run_content import Fixed
from service.storage.posted_findings import DECLINED, OPEN, Known

__all__ = ["NO_THREADS", "ThreadsView", "declined_by", "fixed_threads", "view"]

@dataclass(frozen=True)
class ThreadsView:
    """What the threads decided, for the worker."""

    #: fingerprint -> why (a short phrase), for findings declined now.
    declined_now: dict[str, str]
    #: The declined findings (earlier and now), as the engine is told of them.
    declined: tuple[str, ...]
    #: Open findings whose code changed, for the engine to re-check (ref -> thread id).
    earlier: tuple[EarlierFinding, ...]


NO_THREADS: ThreadsView = ThreadsView(declined_now={}, declined=(), earlier=())


def fixed_threads(seen: ThreadsView, result: EngineResult) -> tuple[Fixed, ...]:
    """The earlier findings a completed run said no longer hold (unknown refs ignored)."""
    if result.stop_reason != "completed":
        return ()
    by_ref = {e.ref: e for e in seen.earlier}
    return tuple(Fixed(fingerprint=by_ref[r].fingerprint, thread_id=by_ref[r].thread_id)
                 for r in result.fixed if r in by_ref)


def _may(comment_login: str, association: str, author: str, config: TriggersConfig) -> bool:
    if not comment_login or comment_login.lower().endswith("[bot]"):
        return False
    if comment_login.lower() == author.lower():
        return True
    return is_allowed_author({"login": comment_login}, association, config)


def declined_by(thread: Thread, *, author: str, config: TriggersConfig,
                phrases: Sequence[str], trusted: Iterable[str] = ()) -> str | None:
    """Why ``thread`` (one of the App's findings) is declined, or None.

    ``trusted`` are logins known to be allowed (seen with an allowed association).
    """
    if not thread.comments:
        return None
    root = thread.comments[0]
    allowed = {t.lower() for t in trusted} | {author.lower()} | {
        u.lower() for u in config.allowed_users}
    for login in root.thumbs_down:
        if login.lower() in allowed:
            return f"👎 by {login}"
    for reply in thread.comments[1:]:
        if (starts_declining(reply.body, phrases)
                and _may(reply.login, reply.association, author, config)):
            return f"replied by {reply.login}"
    # Only the author and people with write access can resolve a thread: a person who did,
    # while its code stayed as it was, answered the finding.
    who = thread.resolved_by
    if thread.resolved and who and not who.lower().endswith("[bot]") and not thread.outdated:
        return f"resolved by {who}"
    return None


def _trusted(threads: Iterable[Thread], config: TriggersConfig) -> set[str]:
    """Logins seen in these threads with an allowed association."""
    return {c.login for t in threads for c in t.comments
            if c.login and is_allowed_author({"login": c.login}, c.association, config)}


def _title(comment: ThreadComment) -> str:
    first = next((line for line in comment.body.splitlines() if line.strip()), "")
    return first.strip().strip("*").strip()[:200]


def view(threads: Sequence[Thread], known: Sequence[Known], *, author: str,
         config: TriggersConfig, phrases: Sequence[str]) -> ThreadsView:
    """What the threads of the App's findings (``known``) decide."""
    by_root = {t.root_id: t for t in threads if t.root_id is not None}
    trusted = _trusted(threads, config)
    declined_now: dict[str, str] = {}
    declined: list[str] = []
    earlier: list[EarlierFinding] = []
    for finding in known:
        thread = by_root.get(finding.comment_id)
        if thread is None:
            continue  # the comment is gone (deleted, or the thread unreadable)
        title = _title(thread.comments[0])
        why = (declined_by(thread, author=author, config=config, phrases=phrases,
                           trusted=trusted) if finding.state == OPEN else None)
        if why is not None:
            declined_now[finding.fingerprint] = why
        if finding.state == DECLINED or why is not None:
            declined.append(f"{finding.path}:{finding.line} ({finding.category}) {title}")
        elif (finding.state == OPEN and thread.outdated and not thread.resolved
              and len(earlier) < MAX_EARLIER):
            earlier.append(EarlierFinding(
                ref=f"E{len(earlier) + 1}", fingerprint=finding.fingerprint,
                thread_id=thread.id, path=finding.path, line=finding.line,
                severity=finding.severity, category=finding.category, title=title))
    return ThreadsView(declined_now=declined_now, declined=tuple(declined),
                       earlier=tuple(earlier))
