"""Where something happened in an installation, in one request: the search API.

``GET /search/issues?q=is:pr updated:>=T org:ACME`` lists the pull requests of the
account updated since ``T`` — a push, a comment, a review comment, a state change each
move a pull request's ``updated_at`` — across every repository the installation's token
can see, 100 a page. It counts against the search API's own limit (30 a minute per
installation), not the installation's hourly one, so a cycle learns which of ten
thousand repositories to poll for the price of one request per hundred active pull
requests (docs/POLLER.md#the-schedule).

Search is an index: an update is found some seconds after it happens. Each search
therefore starts ``OVERLAP`` before the last one succeeded, and a repository's poll is
what decides (the poll is conditional and idempotent). What search cannot be trusted
with — ``incomplete_results``, more than the 1,000 results it will list, an error — makes
``search`` return None, and the cycle then relies on its sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.payload import PayloadError, github_time

__all__ = ["OVERLAP", "Hits", "qualifier", "search"]

log = logging.getLogger(__name__)

#: How far before the last successful search the next one starts (the index's lag).
OVERLAP: Final = timedelta(minutes=5)
MAX_PAGES: Final = 10  # GitHub lists the first 1,000 results only
_REPO_URL_MARK: Final = "/repos/"


def qualifier(account: str, account_type: str) -> str:
    """The search qualifier naming an installation's account."""
    return f"{'org' if account_type == 'Organization' else 'user'}:{account}"


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _hit(item: Any) -> tuple[str, datetime] | None:
    """(``owner/name``, ``updated_at``) of a search result, or None if it is not one."""
    if not isinstance(item, Mapping) or "pull_request" not in item:
        return None
    url = item.get("repository_url")
    if not isinstance(url, str) or _REPO_URL_MARK not in url:
        return None
    repo = url.rsplit(_REPO_URL_MARK, 1)[1]
    try:
        return repo, github_time(item, "updated_at", "search result")
    except PayloadError:
        return None


@dataclass(frozen=True)
class Hits:
    """What a search found: each repository with a pull request updated since, and the
    newest such update; ``whole`` is False when GitHub listed only some (its first
    1,000), so the next search starts from the same point."""

    repositories: dict[str, datetime]
    whole: bool = True


async def search(client: GitHubClient, installation_id: int, account: str,
                 account_type: str, since: datetime) -> Hits | None:
    """The repositories with a pull request updated at or after ``since``; None when
    the answer cannot be used (an error, ``incomplete_results``, another shape)."""
    query = f"is:pr updated:>={_stamp(since)} {qualifier(account, account_type)}"
    params: dict[str, str | int] = {"q": query, "sort": "updated", "order": "desc",
                                    "per_page": 100}
    found: dict[str, datetime] = {}
    extra = {"installation_id": installation_id}
    try:
        for page in range(1, MAX_PAGES + 1):
            body = await client.get_json(installation_id, "/search/issues",
                                         {**params, "page": page})
            if not isinstance(body, Mapping) or not isinstance(body.get("items"), list):
                log.warning("search answered in an unknown shape; sweeping only", extra=extra)
                return None
            if body.get("incomplete_results") is True:
                log.info("search results incomplete; sweeping only", extra=extra)
                return None
            for item in body["items"]:
                hit = _hit(item)
                if hit is not None and (hit[0] not in found or hit[1] > found[hit[0]]):
                    found[hit[0]] = hit[1]
            total = body.get("total_count")
            if len(body["items"]) < 100 or not isinstance(total, int) or total <= page * 100:
                return Hits(found)
    except GitHubError as exc:
        log.warning("search failed; sweeping only", extra={**extra, "error": str(exc)})
        return None
    log.info("more than 1,000 pull requests updated since the last search; the rest wait "
             "for the next search or the sweep", extra=extra)
    return Hits(found, whole=False)
