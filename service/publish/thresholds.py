"""Precision over volume: which findings are posted (pure).

``min_severity`` drops the findings below it and ``max_findings`` keeps the most serious
(the engine's order among equals). Nothing is dropped silently: what is not posted is
counted by severity on the ``Publication`` (``not_shown``) and said in the review body —
"4 more minor notes not shown". The operator's ``review.min_severity`` and
``review.max_findings`` apply, or the repository's ``.github/pr-review-agent.yml`` where it
sets them (``Effective``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from service.config.repository.merge import Effective
from service.config.schema import ReviewConfig
from service.model.severity import SEVERITIES, at_least
from service.publish.publication import Publication

__all__ = ["limits", "not_shown_line", "thresholds"]

_NOUNS = {"critical": ("critical finding", "critical findings"),
          "major": ("major finding", "major findings"),
          "minor": ("minor note", "minor notes"), "nit": ("nit", "nits")}


def limits(operator: ReviewConfig, repository: Effective) -> tuple[str, int]:
    """``(min_severity, max_findings)`` in force: the repository's where its file sets them."""
    settings = repository.settings
    return (settings.min_severity or operator.min_severity,
            settings.max_findings or operator.max_findings)


def thresholds(pub: Publication, min_severity: str, max_findings: int) -> Publication:
    """``pub`` with only the findings to post, and the rest counted in ``not_shown``."""
    ranked = sorted(enumerate(pub.findings),
                    key=lambda item: (SEVERITIES.index(item[1].severity), item[0]))
    kept = [i for i, f in ranked if at_least(f.severity, min_severity)][:max_findings]
    if len(kept) == len(pub.findings):
        return pub
    chosen = set(kept)
    hidden = Counter(f.severity for i, f in enumerate(pub.findings) if i not in chosen)
    return replace(pub, findings=tuple(f for i, f in enumerate(pub.findings) if i in chosen),
                   not_shown=tuple((s, hidden[s]) for s in SEVERITIES if hidden[s]))


def not_shown_line(pub: Publication) -> str | None:
    """"4 more minor notes and 1 nit not shown …", or None when everything is posted."""
    if not pub.not_shown:
        return None
    parts = [f"{n} more {_NOUNS[s][n != 1]}" for s, n in pub.not_shown]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return (f"{listed} not shown (below the minimum severity posted, or past the number of "
            "findings posted: `min_severity`, `max_findings`).")
