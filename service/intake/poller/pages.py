"""Fetching one listing page, conditionally or not, and counting what it cost.

Only a listing's first page is sent conditionally. A 304 there is the cheap answer the
poller lives on (free against the primary rate limit, and proof that nothing in the
listing moved); a later page is fetched in full because a 304 carries no body, and a page
whose items we do not have cannot be reasoned about.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.urls import parse_link_header

Params = Mapping[str, str | int | bool]


@dataclass
class Tally:
    """Requests a poll made, how many GitHub answered 304, and how many of the counted
    ones were a cold start's seeding (spent once per stream, not every cycle)."""

    requests: int = 0
    not_modified: int = 0
    seeding: int = 0

    @property
    def counted(self) -> int:
        """Requests that counted against the installation's primary rate limit."""
        return self.requests - self.not_modified

    @property
    def recurring(self) -> int:
        """Counted requests a later cycle may spend again: all but the seeding."""
        return self.counted - self.seeding

    def add(self, other: Tally) -> None:
        self.requests += other.requests
        self.not_modified += other.not_modified
        self.seeding += other.seeding


@dataclass(frozen=True)
class Page:
    """One page of a listing: its items (``None`` for a 304) and the next page's URL."""

    items: list[Any] | None
    next_url: str | None

    @property
    def not_modified(self) -> bool:
        return self.items is None


def _where(path: str) -> str:
    # Errors name the path only: a Link URL's query (since=...) stays out of messages.
    return urlsplit(path).path


def _items(data: Any, path: str) -> list[Any]:
    if not isinstance(data, list):
        raise GitHubError("listing response is not a JSON array", method="GET",
                          path=_where(path))
    return data


async def fetch_page(
    client: GitHubClient, installation_id: int, path: str, params: Params | None, *,
    conditional: bool, tally: Tally, seeding: bool = False,
) -> Page:
    """GET one page as ``installation_id``.

    ``conditional`` sends the validators stored for this token (and stores the new ones);
    otherwise the request is a plain GET whose answer is always a full page. ``path`` may
    be a ``Link`` URL, which already carries its whole query. ``seeding`` marks a counted
    request as a cold start's (see ``Tally``).
    """
    tally.requests += 1
    if conditional:
        result = await client.get_conditional(installation_id, path, params)
        if result.not_modified:
            tally.not_modified += 1
            return Page(None, result.links.get("next"))
        tally.seeding += int(seeding)
        return Page(_items(result.data, path), result.links.get("next"))
    response = await client.request(installation_id, "GET", path, params=params)
    tally.seeding += int(seeding)
    try:
        data = response.json()
    except ValueError:
        raise GitHubError("response body is not JSON", status=response.status_code,
                          method="GET", path=_where(path)) from None
    return Page(_items(data, path), parse_link_header(response.headers.get("link")).get("next"))
