"""Claude Code's fitted rate: how many tokens a review of ``lines`` diff lines has cost.

A Claude Code run costs far more than its prompt (it reads files, and every turn re-reads
the conversation), so once its ledger can say, the pre-flight estimate (``calls``) is
``tokens ≈ a·lines + b``, fitted by ordinary least squares on this engine's own history:
the most recent settled ledger rows that reviewed something (``reviewed_lines`` set),
ended ``completed`` and know what they cost (confidence ``exact`` or ``estimated``).
A truncated, timed-out or failed run is left out: its cost says where it was stopped,
not what the review needed. Until ``MIN_SAMPLES`` such rows exist, or when they all have
the same size (no slope can be told from one point), there is no fit (``fitted`` is
False) and the run is priced from its prompt alone.

The fit is arithmetic only; ``load_estimator`` is the one function that reads the store.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from service.storage import ledger
from service.storage.database import Transaction

#: Rows needed before the fit replaces the defaults, and how many recent rows it reads.
MIN_SAMPLES: Final = 10
SAMPLE_LIMIT: Final = 200

@dataclass(frozen=True)
class Estimator:
    """``tokens(lines) = ceil(per_line·lines + base)``; ``samples`` is 0 when not fitted."""

    per_line: float = 0.0
    base: float = 0.0
    samples: int = 0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.per_line) and math.isfinite(self.base)):
            raise ValueError("estimator coefficients must be finite")
        if self.per_line < 0 or self.base < 0:
            raise ValueError("estimator coefficients must not be negative")

    @property
    def fitted(self) -> bool:
        return self.samples > 0

    def tokens(self, lines: int) -> int:
        if lines < 0:
            raise ValueError("lines must not be negative")
        return math.ceil(self.per_line * lines + self.base)


def fit(samples: Sequence[tuple[int, int]], default: Estimator | None = None,
        *, min_samples: int = MIN_SAMPLES) -> Estimator:
    """Least squares over ``(lines, tokens)`` pairs, or ``default`` when they cannot tell.

    Both coefficients are kept non-negative: a negative slope (more lines, fewer tokens)
    is noise, and the estimate falls back to the mean; a negative intercept is refitted
    through the origin.
    """
    fallback = default or Estimator()
    n = len(samples)
    if n < min_samples:
        return fallback
    mean_x = sum(x for x, _ in samples) / n
    mean_y = sum(y for _, y in samples) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in samples)
    if sxx == 0:
        return fallback
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in samples)
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    if slope < 0:
        return Estimator(per_line=0.0, base=mean_y, samples=n)
    if intercept < 0:
        sum_xx = sum(x * x for x, _ in samples)
        through_origin = sum(x * y for x, y in samples) / sum_xx
        return Estimator(per_line=max(0.0, through_origin), base=0.0, samples=n)
    return Estimator(per_line=slope, base=intercept, samples=n)


def load_estimator(conn: Transaction, engine: str, default: Estimator | None = None,
                   *, min_samples: int = MIN_SAMPLES, limit: int = SAMPLE_LIMIT) -> Estimator:
    """The estimator for ``engine``, fitted on its latest settled ledger rows."""
    return fit(ledger.estimator_samples(conn, engine, limit), default,
               min_samples=min_samples)
