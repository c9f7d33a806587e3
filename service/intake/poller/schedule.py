"""Which repositories a cycle polls (pure): those where something happened, and a sweep
of the rest within a share of the installation's rate limit.

A poll costs nothing while the listings answer 304, but every installation token lasts
an hour and GitHub's ETags change with the token, so the first poll of a repository
after a rotation is three counted requests (its three listings). Polling every
repository every cycle therefore costs three requests per repository per hour, whatever
happens in them: 30,000 an hour at 10,000 repositories, more than twice the largest
installation limit (docs/POLLER.md#the-schedule). So a cycle polls:

1. **hinted** repositories, where the search API (``fanin``) saw a pull request updated
   since the repository's last poll — the cost follows what happens, not how many
   repositories there are;
2. a **sweep** of the others, each at most once per ``sweep_interval``: the cycle's own
   interval when that costs under ``POLL_SHARE`` of the installation's hourly limit, and
   as often as that share allows otherwise; ``sweep_quota`` repositories a cycle, the
   least recently polled first (never polled: first of all), so the sweep is spread
   evenly and none waits past its turn.

The sweep is the backstop for what search cannot show (an index that lags past the
window, a result list cut short); webhooks and the delivery log
(``service.intake.recovery``) are what make reacting fast.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Final

__all__ = ["POLL_COST", "POLL_SHARE", "choose", "hinted", "sweep_interval", "sweep_quota"]

#: The share of an installation's hourly limit the sweep may spend (the workers keep the
#: pacing reserve; the polls search hints at are on top, and follow the events).
POLL_SHARE: Final = 0.10
#: Counted requests of one poll after a token rotation: its three listings.
POLL_COST: Final = 3
#: A search hit within this much of a repository's last poll still asks for a poll:
#: GitHub's timestamps have one-second resolution.
SAME_SECOND: Final = timedelta(seconds=1)


def sweep_interval(repositories: int, limit: int, interval: timedelta) -> timedelta:
    """How often each of ``repositories`` is polled when nothing says it changed: every
    ``interval``, unless that costs more than ``POLL_SHARE`` of ``limit`` (an hour's);
    then as often as the share pays for."""
    per_hour = max(1.0, limit * POLL_SHARE)
    return max(interval, timedelta(hours=repositories * POLL_COST / per_hour))


def sweep_quota(repositories: int, sweep: timedelta, interval: timedelta) -> int:
    """Sweep polls per cycle: the repositories spread evenly over the sweep."""
    if repositories <= 0:
        return 0
    return math.ceil(repositories * (interval / sweep))


def hinted(hits: Mapping[str, datetime], last_polled: Mapping[str, datetime]
           ) -> dict[str, datetime]:
    """The repositories a search hit names that have changed since their last poll."""
    return {repo: at for repo, at in hits.items()
            if repo not in last_polled or at > last_polled[repo] - SAME_SECOND}


def choose(repositories: Sequence[str], last_polled: Mapping[str, datetime],
           hints: Mapping[str, datetime], now: datetime, *, sweep: timedelta,
           quota: int) -> list[str]:
    """The repositories this cycle polls: every hinted one (the newest activity first),
    then up to ``quota`` whose sweep is due (never polled, then the longest unpolled)."""
    known = set(repositories)
    chosen = sorted((r for r in hints if r in known), key=lambda r: (-hints[r].timestamp(), r))
    taken = set(chosen)
    due = [r for r in repositories if r not in taken
           and (r not in last_polled or now - last_polled[r] >= sweep)]
    due.sort(key=lambda r: (r in last_polled, last_polled.get(r, now), r))
    return chosen + due[:quota]
