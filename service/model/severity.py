"""How serious a finding is: the one scale the engine reports on, the check run gates on
(``checks.fail_on``) and the review body counts by."""

from __future__ import annotations

from typing import Final, Literal, get_args

Severity = Literal["critical", "major", "minor", "nit"]
#: Most serious first.
SEVERITIES: Final[tuple[Severity, ...]] = get_args(Severity)


def at_least(severity: str, threshold: str) -> bool:
    """Whether ``severity`` is ``threshold`` or more serious (both from ``SEVERITIES``)."""
    return SEVERITIES.index(severity) <= SEVERITIES.index(threshold)
