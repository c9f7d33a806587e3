"""The simulator's controllable clock.

Everything time-dependent in the simulated GitHub (JWT ``iat``/``exp`` checks, token
expiry, rate-limit windows, ``since`` filters, timestamps on new objects, the ``Date``
header) reads this clock, never the host clock directly, so a test can make an hour pass
in a microsecond or pretend GitHub's clock is behind the client's.

By default the clock follows real time (``offset`` 0): a client that signs JWTs with the
host clock is then judged exactly as GitHub would judge it. ``advance`` shifts it forward;
``freeze`` stops it at an instant (useful for byte-exact payload assertions).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta


class SimClock:
    """Real time plus an offset, or a frozen instant."""

    def __init__(self, *, offset_seconds: float = 0.0, frozen_at: datetime | None = None) -> None:
        if frozen_at is not None:
            _require_aware(frozen_at)
        self._offset = float(offset_seconds)
        self._frozen = frozen_at

    def now(self) -> datetime:
        """The simulated current time (aware UTC)."""
        if self._frozen is not None:
            return self._frozen
        return datetime.fromtimestamp(time.time() + self._offset, tz=UTC)

    def timestamp(self) -> float:
        """The simulated current time as epoch seconds."""
        return self.now().timestamp()

    @property
    def offset_seconds(self) -> float:
        """How far the simulated clock runs ahead of the host clock (when not frozen)."""
        return self._offset

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward (or back, with a negative value); returns the new now."""
        if self._frozen is not None:
            self._frozen = self._frozen + timedelta(seconds=seconds)
        else:
            self._offset += seconds
        return self.now()

    def set(self, at: datetime) -> None:
        """Jump to ``at``; a frozen clock stays frozen, a running one keeps running from there."""
        _require_aware(at)
        if self._frozen is not None:
            self._frozen = at
        else:
            self._offset = at.timestamp() - time.time()

    def freeze(self, at: datetime | None = None) -> datetime:
        """Stop the clock at ``at`` (default: the current simulated time)."""
        if at is not None:
            _require_aware(at)
        self._frozen = at if at is not None else self.now()
        return self._frozen

    def unfreeze(self) -> None:
        """Resume running from the frozen instant."""
        if self._frozen is not None:
            self._offset = self._frozen.timestamp() - time.time()
            self._frozen = None


def _require_aware(value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime not allowed: {value!r}")


def iso(value: datetime) -> str:
    """GitHub's timestamp format: ``2024-05-01T12:00:00Z`` (second precision, UTC)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(value: str) -> datetime:
    """Parse an ISO-8601 timestamp; naive values are rejected (GitHub always sends a zone)."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    _require_aware(parsed)
    return parsed.astimezone(UTC)
