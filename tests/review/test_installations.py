"""Which installation covers a repository: the store answers first; a repository it does
not know is asked of GitHub once (``GET /repos/{o}/{r}/installation``) and remembered — on
both backends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.review.installations import Installations
from service.storage import repositories
from service.storage.database import Database
from tests.github.client_kit import FakeClock, FakeSleep, Script, make_client, ok

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


@pytest.mark.anyio
async def test_the_store_answers_first_and_github_is_asked_once(database: Database) -> None:
    clock = FakeClock()
    script = Script(clock, ok({"id": 77, "account": {"login": "beta"}}))
    installations = Installations(database, make_client(script, clock, FakeSleep(clock)))
    with database.transaction() as tx:
        repositories.add(tx, "acme/widgets", 31, NOW)
    assert await installations("acme/widgets") == 31
    assert script.requests == []  # the store knew
    assert await installations("beta/tools") == 77
    assert await installations("beta/tools") == 77  # remembered: one request
    [asked] = script.requests
    assert asked.url.path == "/repos/beta/tools/installation"
    assert asked.headers["authorization"] == "Bearer app-jwt-value"  # as the App


@pytest.mark.anyio
async def test_a_name_that_is_not_a_repository_is_refused_before_any_call(
        database: Database) -> None:
    clock = FakeClock()
    script = Script(clock)
    installations = Installations(database, make_client(script, clock, FakeSleep(clock)))
    with pytest.raises(ValueError, match="not a repository name"):
        await installations("../etc")
    assert script.requests == []

