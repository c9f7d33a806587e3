"""Primary and secondary rate limits, on the simulated clock.

Primary: one bucket per installation (every token of an installation shares it, as on
GitHub) or per App for JWT calls. A window opens at the first request and resets
``rate_window_seconds`` later; ``x-ratelimit-reset`` is that instant. A 304 is refunded.
An installation's limit is GitHub's: ``rate_limit`` (5,000), plus 50 an hour for each
repository above 20, at most ``installation_rate_limit_max`` (12,500; 15,000 on GitHub
Enterprise Cloud). The search API has a bucket of its own (``resource: search``): 30
requests a minute.

Secondary: content-creating requests per installation in a sliding minute and hour, and
in-flight requests per installation. Exceeding one answers 403 (or 429) with
``Retry-After`` set to when the oldest counted request leaves the window.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .settings import Settings


@dataclass
class Bucket:
    limit: int
    used: int
    reset_at: int  # epoch seconds
    resource: str = "core"

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.remaining),
            "x-ratelimit-used": str(min(self.used, self.limit)),
            "x-ratelimit-reset": str(self.reset_at),
            "x-ratelimit-resource": self.resource,
        }


#: The suffix of a bucket key for the search API's own limit: ``installation:31:search``.
SEARCH = ":search"


class RateLimiter:
    def __init__(self, settings: Settings,
                 repositories: Callable[[str], int] = lambda key: 0) -> None:
        self._settings = settings
        self._repositories = repositories  # how many repositories a bucket's owner has
        self._buckets: dict[str, Bucket] = {}
        self._creations: dict[str, deque[float]] = {}
        self._in_flight: dict[str, int] = {}

    def bucket(self, key: str, now: float) -> Bucket:
        """The current bucket for ``key`` (a fresh window if the old one has reset)."""
        bucket = self._buckets.get(key)
        if bucket is None or now >= bucket.reset_at:
            settings = self._settings
            if key.endswith(SEARCH):
                bucket = Bucket(limit=settings.search_rate_limit, used=0,
                                reset_at=math.ceil(now) + 60, resource="search")
            else:
                bucket = Bucket(limit=self.limit_of(key), used=0,
                                reset_at=math.ceil(now) + settings.rate_window_seconds)
            self._buckets[key] = bucket
        return bucket

    def limit_of(self, key: str) -> int:
        """GitHub's hourly limit for ``key``: an installation's grows with its
        repositories (50 for each above 20), up to the cap."""
        base = self._settings.rate_limit
        if not key.startswith("installation:"):
            return base
        extra = 50 * max(0, self._repositories(key) - 20)
        return max(base, min(base + extra, self._settings.installation_rate_limit_max))

    def consume(self, key: str, now: float) -> tuple[Bucket, bool]:
        """Count one request; returns the bucket and whether it was allowed."""
        bucket = self.bucket(key, now)
        if bucket.used >= bucket.limit:
            return bucket, False
        bucket.used += 1
        return bucket, True

    def refund(self, key: str) -> None:
        bucket = self._buckets.get(key)
        if bucket is not None and bucket.used > 0:
            bucket.used -= 1

    def set_remaining(self, key: str, remaining: int, now: float) -> Bucket:
        """Test helper: pretend ``limit - remaining`` requests were already made."""
        bucket = self.bucket(key, now)
        bucket.used = max(0, bucket.limit - remaining)
        return bucket

    def content_retry_after(self, key: str, now: float) -> int | None:
        """Seconds to wait if one more content-creating request would exceed a budget."""
        stamps = self._creations.setdefault(key, deque())
        while stamps and stamps[0] <= now - 3600:
            stamps.popleft()
        waits: list[float] = []
        in_minute = [t for t in stamps if t > now - 60]
        if len(in_minute) >= self._settings.secondary_per_minute:
            waits.append(in_minute[len(in_minute) - self._settings.secondary_per_minute] + 60 - now)
        if len(stamps) >= self._settings.secondary_per_hour:
            waits.append(stamps[len(stamps) - self._settings.secondary_per_hour] + 3600 - now)
        if not waits:
            return None
        return max(1, math.ceil(max(waits)))

    def record_creation(self, key: str, now: float) -> None:
        self._creations.setdefault(key, deque()).append(now)

    def enter(self, key: str) -> bool:
        """Start an in-flight request; False if that exceeds the concurrency limit."""
        count = self._in_flight.get(key, 0)
        if count >= self._settings.max_concurrent:
            return False
        self._in_flight[key] = count + 1
        return True

    def in_flight(self, key: str) -> int:
        return self._in_flight.get(key, 0)

    def leave(self, key: str) -> None:
        self._in_flight[key] = max(0, self._in_flight.get(key, 0) - 1)
