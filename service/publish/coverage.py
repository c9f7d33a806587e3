"""What a review read, in the words every post uses (pure): the review body, the check run
and the summary comment all say it the same way, so a partial review never reads as a
whole one.

"Reviewed 42 of 50 files (8 not reviewed: 3 generated, 5 over the model's window —
listed below)." Files the operator's own ``review.excluded_paths`` leaves out are counted
among the files, named in the list, and do not make a review partial: that is policy,
not something the review missed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

from service.publish.run_content import Coverage, Omitted

#: Why a file was not read, as a count reads ("3 generated"): (one, many).
REASONS: Final = {
    "excluded": ("excluded by review.excluded_paths", "excluded by review.excluded_paths"),
    "max_diff_lines": ("over review.max_diff_lines", "over review.max_diff_lines"),
    "lock_file": ("lock file", "lock files"),
    "generated": ("generated", "generated"),
    "vendored": ("vendored", "vendored"),
    "renamed_only": ("renamed without changes", "renamed without changes"),
    "over_window": ("over the model's window", "over the model's window"),
    "max_run_tokens": ("over the run's token limit (budget.max_run_tokens)",
                       "over the run's token limit (budget.max_run_tokens)"),
    "not_reviewed": ("in a part of the run that failed", "in a part of the run that failed"),
}
#: Why one file was not read, as the list of files says it.
WHY: Final = {
    "lock_file": "a lock file, left out to fit the model's window",
    "generated": "generated, left out to fit the model's window",
    "vendored": "vendored, left out to fit the model's window",
    "renamed_only": "renamed without changes, left out to fit the model's window",
    "over_window": "too large for the model's context window even alone",
    "max_run_tokens": "over what the run may spend (budget.max_run_tokens)",
    "not_reviewed": "its part of the run did not finish",
}


def partial(omitted: Sequence[Omitted]) -> bool:
    """Something the review was to read was not read (see the module doc)."""
    return any(o.reason != "excluded" for o in omitted)


def breakdown(omitted: Sequence[Omitted]) -> str:
    """``3 generated, 5 over the model's window``, in the order first seen."""
    counts = Counter(o.reason for o in omitted)
    return ", ".join(f"{n} {REASONS[r][0 if n == 1 else 1]}" for r, n in counts.items())


def sentence(coverage: Coverage | None, omitted: Sequence[Omitted]) -> str | None:
    """The coverage sentence, or None when the review read all it was meant to in one
    call (nothing worth saying)."""
    whole = coverage is None or (coverage.parts <= 1 and not coverage.pruned)
    if not partial(omitted) and whole:
        return None
    left = (f" ({len(omitted):,} not reviewed: {breakdown(omitted)} — listed below)"
            if omitted else "")
    if coverage is None:  # a run recorded before coverage was kept
        return f"{len(omitted):,} file(s) not reviewed: {breakdown(omitted)} — listed below."
    total = coverage.files
    said = f"Reviewed {coverage.reviewed:,} of {total:,} file{'s' if total != 1 else ''}{left}."
    if coverage.parts > 1:
        said += (f" The change is larger than the model's window, so it was read in "
                 f"{coverage.parts} parts.")
    if coverage.pruned:
        said += " To fit, the diff sent left out " + "; ".join(coverage.pruned) + "."
    return said


def title(coverage: Coverage | None, omitted: Sequence[Omitted]) -> str | None:
    """``Reviewed 42 of 50 files`` for a check run's title when the review is partial."""
    if not partial(omitted):
        return None
    if coverage is None:
        return f"Partly reviewed ({len(omitted):,} file(s) not read)"
    return f"Reviewed {coverage.reviewed:,} of {coverage.files:,} files"
