"""The ``posted_findings`` table: every finding the App posted on a pull request, by
fingerprint — its memory across reviews.

One row per pull request and fingerprint (``service.model.fingerprint``): where and how serious
it was when first posted, on which head, and its ``state``. A later review of the same pull
request does not post a finding whose fingerprint is here. The table holds no review text
(no title, no body), so the retention purge, which empties ``runs``, leaves it: the memory
outlives the content. Written by the publisher in the transaction that records the post.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from service.storage.database import Transaction
from service.storage.times import to_db_time

__all__ = ["DECLINED", "OPEN", "RESOLVED", "STATES", "Known", "PostedFinding", "decline_reply",
           "fingerprints", "inline", "mark", "remember"]

OPEN: Final = "open"
DECLINED: Final = "declined"
RESOLVED: Final = "resolved"
#: ``open``: posted and standing; ``declined``: a person declined it on its thread (never
#: raised again on this pull request); ``resolved``: the engine said it no longer holds and
#: the App resolved its thread. Only an ``open`` finding changes state.
STATES: Final = (OPEN, DECLINED, RESOLVED)

_REMEMBER = """
INSERT INTO posted_findings (repo, pr_number, fingerprint, path, line, severity, category,
                             head_sha, comment_id, posted_at, state)
VALUES (:repo, :pr_number, :fingerprint, :path, :line, :severity, :category, :head_sha,
        :comment_id, :posted_at, :state)
ON CONFLICT (repo, pr_number, fingerprint) DO NOTHING
"""
_FINGERPRINTS = "SELECT fingerprint FROM posted_findings WHERE repo = ? AND pr_number = ?"
_INLINE = ("SELECT comment_id, fingerprint, path, line, severity, category, state"
           " FROM posted_findings WHERE repo = ? AND pr_number = ? AND comment_id IS NOT NULL"
           " ORDER BY posted_at, fingerprint")
_DECLINE_REPLY = ("UPDATE posted_findings SET state = 'declined' WHERE repo = ? AND pr_number = ?"
                  " AND comment_id = ? AND state = 'open' RETURNING fingerprint")
_MARK = ("UPDATE posted_findings SET state = ? WHERE repo = ? AND pr_number = ?"
         " AND fingerprint = ? AND state = 'open'")


@dataclass(frozen=True)
class PostedFinding:
    """One finding as posted: where it was, how serious, and the inline comment (None when
    it went in the review body)."""

    fingerprint: str
    path: str
    line: int
    severity: str
    category: str
    comment_id: int | None = None


def remember(tx: Transaction, repo: str, pr_number: int, *, head_sha: str,
             posted: Iterable[PostedFinding], now: datetime) -> None:
    """Record findings posted on ``repo``#``pr_number`` (a fingerprint already known keeps
    its first row)."""
    stamp = to_db_time(now)
    for p in posted:
        tx.execute(_REMEMBER, {
            "repo": repo, "pr_number": pr_number, "fingerprint": p.fingerprint,
            "path": p.path, "line": p.line, "severity": p.severity, "category": p.category,
            "head_sha": head_sha, "comment_id": p.comment_id, "posted_at": stamp,
            "state": OPEN})


def fingerprints(tx: Transaction, repo: str, pr_number: int) -> frozenset[str]:
    """The fingerprints already posted on ``repo``#``pr_number``."""
    return frozenset(str(r[0]) for r in tx.execute(_FINGERPRINTS, (repo, pr_number)))


@dataclass(frozen=True)
class Known:
    """A finding posted as an inline comment, and where it stands."""

    comment_id: int
    fingerprint: str
    path: str
    line: int
    severity: str
    category: str
    state: str


def inline(tx: Transaction, repo: str, pr_number: int) -> list[Known]:
    """The findings posted on ``repo``#``pr_number`` as inline comments (they have threads)."""
    return [Known(comment_id=int(r[0]), fingerprint=str(r[1]), path=str(r[2]), line=int(r[3]),
                  severity=str(r[4]), category=str(r[5]), state=str(r[6]))
            for r in tx.execute(_INLINE, (repo, pr_number))]


def mark(tx: Transaction, repo: str, pr_number: int, fingerprints_: Iterable[str],
         state: str) -> int:
    """Move open findings to ``state`` (``declined`` or ``resolved``); how many moved."""
    if state not in STATES or state == OPEN:
        raise ValueError(f"a posted finding cannot be moved to {state!r}")
    return sum(tx.execute(_MARK, (state, repo, pr_number, f)).rowcount for f in fingerprints_)


def decline_reply(tx: Transaction, repo: str, pr_number: int, comment_id: int) -> str | None:
    """Decline the open finding whose inline comment is ``comment_id`` (a reply on its
    thread declined it); its fingerprint, or None when ``comment_id`` is not an open
    finding of the App's on this pull request (someone else's thread, or already settled)."""
    row = tx.execute(_DECLINE_REPLY, (repo, pr_number, comment_id)).fetchone()
    return None if row is None else str(row[0])
