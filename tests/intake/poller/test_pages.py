"""One listing page fetched as the poller fetches it: the first conditionally (a 304 is
free and carries no items), a later one in full, and every request counted by what it
cost against the rate limit."""

from __future__ import annotations

import httpx
import pytest

from service.github.errors import GitHubError
from service.intake.poller.pages import Tally, fetch_page
from service.model.etags import ETagStore
from tests.github.client_kit import (
    FakeClock,
    FakeSleep,
    Script,
    clock,
    make_client,
    ok,
    sleep,
)

__all__ = ["clock", "sleep"]  # fixtures

NEXT = '<https://api.github.com/repos/o/r/pulls?page=2&since=2026-01-01>; rel="next"'


@pytest.mark.anyio
async def test_a_conditional_page_then_its_304_and_the_tally(clock: FakeClock,
                                                              sleep: FakeSleep) -> None:
    script = Script(clock, ok([{"number": 1}], etag='"v1"', link=NEXT),
                    lambda request: httpx.Response(304) if request.headers.get(
                        "if-none-match") == '"v1"' else ok([]))
    client = make_client(script, clock, sleep, etags=ETagStore())
    tally = Tally()
    first = await fetch_page(client, 7, "/repos/o/r/pulls", {"state": "all"},
                             conditional=True, tally=tally, seeding=True)
    assert first.items == [{"number": 1}] and not first.not_modified
    assert first.next_url == "https://api.github.com/repos/o/r/pulls?page=2&since=2026-01-01"
    again = await fetch_page(client, 7, "/repos/o/r/pulls", {"state": "all"},
                             conditional=True, tally=tally)
    assert again.not_modified and again.items is None
    assert (tally.requests, tally.not_modified, tally.seeding) == (2, 1, 1)
    assert (tally.counted, tally.recurring) == (1, 0)


@pytest.mark.anyio
async def test_a_later_page_is_fetched_in_full(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(clock, ok([{"number": 2}]))
    client = make_client(script, clock, sleep, etags=ETagStore())
    tally = Tally()
    page = await fetch_page(client, 7, "https://api.github.com/repos/o/r/pulls?page=2",
                            None, conditional=False, tally=tally)
    assert page.items == [{"number": 2}] and page.next_url is None
    assert "if-none-match" not in script.requests[0].headers
    assert (tally.requests, tally.counted, tally.recurring) == (1, 1, 1)


@pytest.mark.anyio
@pytest.mark.parametrize("conditional", [True, False])
async def test_a_page_that_is_not_a_list_is_an_error_naming_the_path_only(
        clock: FakeClock, sleep: FakeSleep, conditional: bool) -> None:
    script = Script(clock, ok({"message": "not a list"}))
    client = make_client(script, clock, sleep, etags=ETagStore())
    with pytest.raises(GitHubError, match="listing response is not a JSON array") as raised:
        await fetch_page(client, 7, "/repos/o/r/pulls?since=2026-01-01T00:00:00Z", None,
                         conditional=conditional, tally=Tally())
    assert "since" not in str(raised.value)


def test_tallies_add_up() -> None:
    total = Tally(requests=3, not_modified=1)
    total.add(Tally(requests=2, not_modified=0, seeding=2))
    assert (total.requests, total.not_modified, total.seeding) == (5, 1, 2)
    assert (total.counted, total.recurring) == (4, 2)
