"""GitHub's clock from its ``Date`` header: the offset kept, skew said once, and a host
that trusts itself until it has heard from GitHub."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from service.github.github_clock import GitHubClock, server_time

HOST = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)


def test_the_date_header_is_read_as_an_aware_instant() -> None:
    assert server_time({"date": "Mon, 01 Jun 2026 12:00:05 GMT"}) == HOST + timedelta(
        seconds=5)
    assert server_time({}) is None
    assert server_time({"date": "yesterday"}) is None


def test_the_offset_is_learnt_from_each_answer_and_applied_to_host_times() -> None:
    clock = GitHubClock(lambda: HOST)
    assert clock.at(HOST) == HOST  # nothing heard yet: the host clock is trusted
    clock.observe({"date": "Mon, 01 Jun 2026 12:00:07 GMT"})
    assert clock.offset == timedelta(seconds=7)
    assert clock.at(HOST + timedelta(minutes=1)) == HOST + timedelta(minutes=1, seconds=7)
    clock.observe({"content-type": "application/json"})  # no Date: nothing learnt
    assert clock.offset == timedelta(seconds=7)
    clock.observe({"date": "Mon, 01 Jun 2026 11:59:58 GMT"})
    assert clock.offset == timedelta(seconds=-2)


def test_a_skew_that_would_break_app_jwts_is_said_once(caplog: pytest.LogCaptureFixture
                                                       ) -> None:
    clock = GitHubClock(lambda: HOST)
    with caplog.at_level(logging.WARNING, logger="service.github.github_clock"):
        clock.observe({"date": "Mon, 01 Jun 2026 12:00:29 GMT"})
        assert caplog.records == []
        clock.observe({"date": "Mon, 01 Jun 2026 12:01:00 GMT"})
        clock.observe({"date": "Mon, 01 Jun 2026 11:58:00 GMT"})
    [warning] = caplog.records
    assert "differs from GitHub's" in warning.getMessage()
    assert warning.clock_offset_seconds == 60.0  # type: ignore[attr-defined]
