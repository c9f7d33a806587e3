"""GitHub's clock, as read from the ``Date`` header of its responses.

``x-ratelimit-reset`` and an HTTP-date ``Retry-After`` are instants on GitHub's clock.
Measuring them against the host clock turns any skew into waking up early (and asking
again while still limited, which GitHub says can get an integration banned) or into
oversleeping. ``GitHubClock`` keeps the offset between the two clocks, learnt from each
response, so the client can measure GitHub's instants on GitHub's time and sleep on its
own.

``Date`` has one-second resolution and is truncated, so GitHub's time is estimated up to
a second early: waits computed from it err long, never short.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Final

log = logging.getLogger(__name__)

# Beyond this difference App JWTs start to fail (they are back-dated by 60 s, and GitHub
# refuses an `iat` in its future): say so once, before that happens.
SKEW_WARNING: Final = timedelta(seconds=30)


def server_time(headers: Mapping[str, str]) -> datetime | None:
    """GitHub's time when it answered: the ``Date`` header as an aware datetime, or None."""
    value = headers.get("date")
    if value is None:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


class GitHubClock:
    """The offset of GitHub's clock from the host's, from the latest ``Date`` seen.

    Until a response has been seen the offset is zero: the host clock is trusted.
    """

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self.offset = timedelta(0)
        self._warned = False

    def observe(self, headers: Mapping[str, str]) -> None:
        """Learn the offset from a response's headers (no ``Date``: nothing learnt)."""
        served = server_time(headers)
        if served is None:
            return
        self.offset = served - self._clock()
        if abs(self.offset) >= SKEW_WARNING and not self._warned:
            self._warned = True
            log.warning("host clock differs from GitHub's; App JWTs may be refused",
                        extra={"clock_offset_seconds": self.offset.total_seconds()})

    def at(self, host_time: datetime) -> datetime:
        """GitHub's time at the host's ``host_time``."""
        return host_time + self.offset
