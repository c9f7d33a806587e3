"""Pacing: how often an installation may be polled, given what its rate limit says.

Pure. The inputs are the installation's last ``x-ratelimit-*`` reading (the client keeps
it), an estimate of what one poll of it costs, the configured interval and ``now``.

The rule:

- Keep a **reserve** of ``reserve_fraction`` of the hourly limit (default 20 %, 1,000 of
  5,000) for the workers, which fetch diffs and post reviews with the same installation
  token. The poller never spends into it.
- ``spendable = remaining − reserve``. If it cannot pay for one more poll, the
  installation is **held until the reset** (``x-ratelimit-reset``).
- Otherwise spread what is spendable evenly until the reset: the next poll is due after
  ``max(interval, seconds_to_reset / (spendable // cost))``. With a healthy budget that is
  just the interval; as the budget runs low the interval stretches, so the poller
  arrives at the reset with the reserve intact instead of running into the limit.
- A 304 does not count against the limit, so an idle repository costs nothing. The cost
  estimate is ``max(counted requests of the last poll, repositories polled, 1)``, where a
  cold start's seeding requests are left out of the last poll's count (they are spent
  once per repository, not every cycle) and the floor of one full request per repository
  stands for what a token rotation or ordinary activity costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from service.github.ratelimit import RateLimit


@dataclass(frozen=True)
class PacingPolicy:
    """``reserve_fraction``: the share of the hourly limit left for everything else."""

    reserve_fraction: float = 0.2

    def __post_init__(self) -> None:
        if not 0.0 <= self.reserve_fraction < 1.0:
            raise ValueError("reserve_fraction must be in [0, 1)")

    def reserve(self, limit: RateLimit) -> int:
        return math.ceil(limit.limit * self.reserve_fraction)


@dataclass(frozen=True)
class Pace:
    """When an installation may next be polled, and why."""

    next_at: datetime
    reason: str  # "interval" | "stretched" | "until_reset"


def estimate_cost(last_counted: int | None, repositories: int) -> int:
    """What one poll of an installation is expected to cost (see the module docstring)."""
    return max(last_counted or 0, repositories, 1)


def hold_until(
    limit: RateLimit | None, cost: int, now: datetime, policy: PacingPolicy,
) -> datetime | None:
    """The reset time, if polling now would spend into the reserve; otherwise None."""
    if limit is None or limit.reset <= now:
        return None
    if limit.remaining - policy.reserve(limit) < max(cost, 1):
        return limit.reset
    return None


def next_poll(
    limit: RateLimit | None, cost: int, interval: timedelta, now: datetime,
    policy: PacingPolicy,
) -> Pace:
    """When the installation may be polled again after a poll that ended at ``now``."""
    if interval <= timedelta(0):
        raise ValueError("interval must be positive")
    normal = Pace(now + interval, "interval")
    if limit is None or limit.reset <= now:
        return normal
    spendable = limit.remaining - policy.reserve(limit)
    cost = max(cost, 1)
    if spendable < cost:
        return Pace(max(limit.reset, now + interval), "until_reset")
    affordable = spendable // cost
    spread = (limit.reset - now) / affordable
    if spread > interval:
        return Pace(now + spread, "stretched")
    return normal
