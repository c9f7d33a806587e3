"""The ``posted_findings`` table: every finding the App posted on a pull request, by
fingerprint — its memory across reviews.

One row per pull request and fingerprint (``service.fingerprint``): where and how serious
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

__all__ = ["OPEN", "STATES", "PostedFinding", "fingerprints", "remember"]

OPEN: Final = "open"
#: ``open``: posted and standing; the states a finding can move to come with declines and
#: resolved threads.
STATES: Final = (OPEN,)

_REMEMBER = """
INSERT INTO posted_findings (repo, pr_number, fingerprint, path, line, severity, category,
                             head_sha, comment_id, posted_at, state)
VALUES (:repo, :pr_number, :fingerprint, :path, :line, :severity, :category, :head_sha,
        :comment_id, :posted_at, :state)
ON CONFLICT (repo, pr_number, fingerprint) DO NOTHING
"""
_FINGERPRINTS = "SELECT fingerprint FROM posted_findings WHERE repo = ? AND pr_number = ?"


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
