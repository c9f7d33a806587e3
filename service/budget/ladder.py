"""The ladder: which rung the budget is on, from the worst utilisation of its windows.

Rungs switch at exactly 60 %, 85 % and 100 %: every comparison is made in integers
(``charged × 100 ≥ pct × limit``), so there is no float drift at a boundary.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Final, Literal, Protocol

REDUCED_PCT: Final = 60
MENTION_ONLY_PCT: Final = 85
EXHAUSTED_PCT: Final = 100


class Mode(enum.Enum):
    """The ladder's rungs, from the worst utilisation across the windows."""

    FULL = "full"                  # below 60 %: admit everything, review everything
    REDUCED = "reduced"            # from 60 %: admit everything, review correctness/security
    MENTION_ONLY = "mention_only"  # from 85 %: refuse pr_opened, admit mention (reduced)
    EXHAUSTED = "exhausted"        # from 100 %: refuse everything

    @property
    def engine_mode(self) -> Literal["full", "reduced"]:
        """What the engine is asked for (``EngineRequest.mode``) under this rung.

        Only FULL gets a full review; from 60 % on, every run is reduced to correctness
        and security, including the mentions still admitted above 85 %.
        """
        return "full" if self is Mode.FULL else "reduced"


class Gauge(Protocol):
    """Anything with a utilisation the ladder can read: a token window, the dollar window."""

    @property
    def name(self) -> str: ...

    def at_least(self, pct: int) -> bool: ...


def mode_for(gauges: Iterable[Gauge]) -> Mode:
    """The rung for the worst of ``gauges``."""
    measured = tuple(gauges)
    for pct, mode in ((EXHAUSTED_PCT, Mode.EXHAUSTED), (MENTION_ONLY_PCT, Mode.MENTION_ONLY),
                      (REDUCED_PCT, Mode.REDUCED)):
        if any(g.at_least(pct) for g in measured):
            return mode
    return Mode.FULL


def first_at(gauges: Iterable[Gauge], pct: int) -> Gauge | None:
    """The first gauge at or above ``pct`` % (the one to name in a refusal), or None."""
    return next((g for g in gauges if g.at_least(pct)), None)
