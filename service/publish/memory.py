"""Findings with a memory: what a review of a pull request does not raise again (pure).

A finding whose fingerprint was already posted on the pull request (``posted_findings``)
is not posted again — the same inline comment on every push is what users of AI reviewers
complain about most — unless the code it points at changed, which changes its fingerprint
(``service.model.fingerprint``). What is held back is counted in the review body. After a post,
``posted`` says what to remember: every finding shown, with its inline comment's id when
it has one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from service.engine.base import Finding
from service.publish.publication import Publication
from service.storage.posted_findings import PostedFinding

__all__ = ["posted", "repeated_line", "without_repeats"]


def without_repeats(pub: Publication, known: frozenset[str]) -> Publication:
    """``pub`` without the findings already posted on its pull request."""
    fresh = tuple(f for f in pub.findings if f.fingerprint is None
                  or f.fingerprint not in known)
    if len(fresh) == len(pub.findings):
        return pub
    return replace(pub, findings=fresh, repeated=len(pub.findings) - len(fresh))


def repeated_line(pub: Publication) -> str | None:
    """"2 findings raised earlier on this pull request are not repeated.", or None."""
    if not pub.repeated:
        return None
    what = "1 finding" if pub.repeated == 1 else f"{pub.repeated} findings"
    verb = "was" if pub.repeated == 1 else "were"
    return (f"{what} this review found {verb} raised earlier on this pull request, on code "
            "that has not changed since, and not repeated.")


def posted(pub: Publication, inline: Sequence[Finding], comment_ids: Sequence[int]
           ) -> tuple[PostedFinding, ...]:
    """What to remember of a review just posted: every finding it shows that has a
    fingerprint, with its inline comment's id (the comments come back in the order sent)."""
    ids = dict(zip(map(id, inline), comment_ids, strict=False)) if len(
        comment_ids) == len(inline) else {}
    return tuple(
        PostedFinding(fingerprint=f.fingerprint, path=f.path, line=f.line,
                      severity=f.severity, category=f.category, comment_id=ids.get(id(f)))
        for f in pub.findings if f.fingerprint is not None)
