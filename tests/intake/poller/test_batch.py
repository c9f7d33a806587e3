"""Polling the repositories a cycle chose (``batch.poll_chosen``): a few at once, a
GitHub failure failing one repository alone, a rate limit stopping the rest, and any
other error raised as it was once the polls under way have ended."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest

from service.github.errors import RateLimited, ServerError
from service.intake.poller.batch import CONCURRENCY, poll_chosen
from service.intake.poller.cycle import RepositoryReport
from service.intake.poller.planner import Chosen
from service.intake.poller.targets import Target

NOW = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)


class Streams:
    """A ``RepositoryPoller`` whose polls take a moment, fail as told, and are counted."""

    def __init__(self, failing: dict[str, Exception] | None = None) -> None:
        self.failing = failing or {}
        self.running = self.most = 0
        self.polled: list[str] = []

    async def poll(self, repo: str, installation_id: int, now: datetime, *,
                   seed_floor: datetime | None = None) -> RepositoryReport:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await anyio.sleep(0.01)
            if repo in self.failing:
                raise self.failing[repo]
            self.polled.append(repo)
            return RepositoryReport(repo=repo, installation_id=installation_id)
        finally:
            self.running -= 1


class Planner:
    def __init__(self) -> None:
        self.done: list[str] = []

    def polled(self, repo: str, now: datetime) -> None:
        self.done.append(repo)


def chosen(count: int) -> Chosen:
    return Chosen([Target(7, f"o/r{i:02d}") for i in range(count)])


@pytest.mark.anyio
async def test_a_few_at_a_time_and_a_github_failure_fails_one_alone() -> None:
    streams, planner = Streams({"o/r03": ServerError("502", status=502)}), Planner()
    batch = await poll_chosen(streams, planner, 7, chosen(12), NOW,  # type: ignore[arg-type]
                              before_poll=None)
    assert streams.most == CONCURRENCY
    assert sorted(r.repo for r in batch.polled) == sorted(planner.done) == [
        f"o/r{i:02d}" for i in range(12) if i != 3]
    assert list(batch.failures) == ["o/r03"] and batch.limited is None


@pytest.mark.anyio
async def test_a_rate_limit_stops_the_polls_not_yet_started() -> None:
    limited = RateLimited("403", until=NOW, kind="primary", status=403)
    streams = Streams({"o/r01": limited})
    batch = await poll_chosen(streams, Planner(), 7, chosen(12), NOW,  # type: ignore[arg-type]
                              before_poll=None)
    assert batch.limited is limited
    assert len(streams.polled) < 11  # those under way finished; the rest wait a cycle


@pytest.mark.anyio
async def test_any_other_error_is_raised_as_it_was() -> None:
    streams = Streams({"o/r00": RuntimeError("the store failed")})
    with pytest.raises(RuntimeError, match="the store failed"):
        await poll_chosen(streams, Planner(), 7, chosen(8), NOW,  # type: ignore[arg-type]
                          before_poll=None)
    assert streams.running == 0
