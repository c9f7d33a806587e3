"""The stored form of an instant, shared by every table module and backend.

Times are stored as text in one fixed-width form so that comparing two of them as
strings in SQL is the same as comparing the instants, on any backend.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["from_db_time", "to_db_time"]


def to_db_time(dt: datetime) -> str:
    """The stored form of an aware instant: UTC, ISO-8601, microseconds, fixed width.

    Always 32 characters, e.g. ``2026-01-02T03:04:05.123456+00:00``, so string order in
    SQL is time order. A naive datetime is a ``ValueError``: it names no instant.
    """
    if not isinstance(dt, datetime):
        raise TypeError(f"expected a datetime, got {type(dt).__name__}")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise ValueError(f"naive datetime {dt.isoformat()} refused: stored times must be aware")
    return dt.astimezone(UTC).isoformat(timespec="microseconds")


def from_db_time(text: str) -> datetime:
    """Parse a stored time back to an aware UTC datetime.

    Accepts any ISO-8601 form with an offset (``Z`` included), so rows written by older
    code in a shorter form still read; a value without an offset is a ``ValueError``.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected a stored time string, got {type(text).__name__}")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ValueError(f"stored time {text!r} has no UTC offset")
    return parsed.astimezone(UTC)
