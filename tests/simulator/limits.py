"""Primary and secondary rate limits, on the simulated clock.

Primary: one bucket per installation (every token of an installation shares it, as on
GitHub) or per App for JWT calls. A window opens at the first request and resets
``rate_window_seconds`` later; ``x-ratelimit-reset`` is that instant. A 304 is refunded.

Secondary: content-creating requests per installation in a sliding minute and hour, and
in-flight requests per installation. Exceeding one answers 403 (or 429) with
``Retry-After`` set to when the oldest counted request leaves the window.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from .settings import Settings


@dataclass
class Bucket:
    limit: int
    used: int
    reset_at: int  # epoch seconds

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(self.limit),
            "x-ratelimit-remaining": str(self.remaining),
            "x-ratelimit-used": str(min(self.used, self.limit)),
            "x-ratelimit-reset": str(self.reset_at),
            "x-ratelimit-resource": "core",
        }


class RateLimiter:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._buckets: dict[str, Bucket] = {}
        self._creations: dict[str, deque[float]] = {}
        self._in_flight: dict[str, int] = {}

    def bucket(self, key: str, now: float) -> Bucket:
        """The current bucket for ``key`` (a fresh window if the old one has reset)."""
        bucket = self._buckets.get(key)
        if bucket is None or now >= bucket.reset_at:
            bucket = Bucket(
                limit=self._settings.rate_limit,
                used=0,
                reset_at=math.ceil(now) + self._settings.rate_window_seconds,
            )
            self._buckets[key] = bucket
        return bucket

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
