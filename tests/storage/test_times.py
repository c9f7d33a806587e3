"""The store's time codec: fixed-width aware UTC text, in string order = time order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone, tzinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.storage.times import from_db_time, to_db_time


def test_to_db_time_is_fixed_width_utc() -> None:
    plus_one = timezone(timedelta(hours=1))
    assert to_db_time(datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)) == (
        "2026-01-02T03:04:05.123456+00:00"
    )
    assert to_db_time(datetime(2026, 1, 2, 4, 4, 5, tzinfo=plus_one)) == (
        "2026-01-02T03:04:05.000000+00:00"
    )
    assert to_db_time(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000000+00:00"


class NoOffset(tzinfo):
    """A tzinfo that names no offset: still naive, by Python's own definition."""

    def utcoffset(self, dt: datetime | None) -> timedelta | None:
        return None

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str | None:
        return None


@pytest.mark.parametrize("naive", [datetime(2026, 1, 2), datetime(2026, 1, 2, tzinfo=NoOffset())])
def test_to_db_time_refuses_a_naive_datetime(naive: datetime) -> None:
    with pytest.raises(ValueError, match="naive"):
        to_db_time(naive)


def test_from_db_time_reads_older_forms_and_refuses_naive() -> None:
    expected = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert from_db_time("2026-01-02T03:04:05Z") == expected
    assert from_db_time("2026-01-02T04:04:05+01:00") == expected
    assert from_db_time("2026-01-02T04:04:05+01:00").tzinfo is UTC
    with pytest.raises(ValueError, match="no UTC offset"):
        from_db_time("2026-01-02T03:04:05")
    with pytest.raises(ValueError):
        from_db_time("yesterday")


offsets = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
)
aware = st.datetimes(
    min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=offsets
)


@given(aware, aware)
def test_string_order_is_time_order(a: datetime, b: datetime) -> None:
    sa, sb = to_db_time(a), to_db_time(b)
    assert len(sa) == len(sb) == 32
    assert (sa < sb) == (a < b)
    assert (sa == sb) == (a == b)
    assert from_db_time(sa) == a
