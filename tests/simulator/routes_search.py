"""``GET /search/issues``: issues and pull requests by qualifiers, as GitHub's search API.

The qualifiers a poller uses are understood — ``is:pr`` / ``type:pr`` (``is:issue``),
``updated:>=T`` / ``updated:>T`` (ISO 8601), ``org:X``, ``user:X``, ``repo:o/r``,
``is:open`` / ``is:closed`` — and any other is 422, so a client cannot rely on one the
simulator ignores. Results are what the token can see (its installation's repositories),
sorted by ``sort=updated|created`` and ``order=desc|asc`` (default: ``desc``), paged by
``per_page`` (≤ 100) and ``page``, never past the first 1,000
(``Only the first 1000 search results are available``). Each item is the issue's shape
with a ``score``. The search API has its own rate limit (30 a minute per installation,
``x-ratelimit-resource: search``). ``Settings.search_lag_seconds`` models the index: an
update is found that long after it happened.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .clock import parse_iso
from .models import Issue
from .rest import ApiError
from .routing import Ctx, Reply, RouteTable

routes = RouteTable()

MAX_RESULTS = 1000
_VALIDATION = "Validation Failed"


def _invalid(message: str) -> ApiError:
    return ApiError(422, _VALIDATION, errors=[{"message": message, "resource": "Search",
                                               "field": "q", "code": "invalid"}])


def _when(value: str) -> datetime:
    try:
        return parse_iso(value)
    except ValueError:
        raise _invalid(f"The date {value!r} is not valid.") from None


def _matcher(query: str) -> Any:
    """A predicate over (issue, repository full name) from the query's qualifiers."""
    tests: list[Any] = []
    for word in query.split():
        name, sep, value = word.partition(":")
        if not sep or not value:
            raise _invalid(f"The search term {word!r} is not supported here.")
        if (name, value) in (("is", "pr"), ("type", "pr")):
            tests.append(lambda i, r: i.is_pull)
        elif (name, value) in (("is", "issue"), ("type", "issue")):
            tests.append(lambda i, r: not i.is_pull)
        elif name == "is" and value in ("open", "closed"):
            tests.append(lambda i, r, state=value: i.state == state)
        elif name == "updated" and value.startswith(">="):
            tests.append(lambda i, r, t=_when(value[2:]): i.updated_at >= t)
        elif name == "updated" and value.startswith(">"):
            tests.append(lambda i, r, t=_when(value[1:]): i.updated_at > t)
        elif name in ("org", "user"):
            tests.append(lambda i, r, o=value.lower(): r.split("/")[0].lower() == o)
        elif name == "repo":
            tests.append(lambda i, r, n=value.lower(): r.lower() == n)
        else:
            raise _invalid(f"The qualifier {name!r} is not supported here.")
    return lambda issue, repo: all(test(issue, repo) for test in tests)


@routes.add("GET", "/search/issues", auth="token", resource="search")
async def search_issues(ctx: Ctx) -> Reply:
    world, token = ctx.world, ctx.token
    assert token is not None
    query = ctx.query.get("q", "").strip()
    if not query:
        raise ApiError(422, _VALIDATION, errors=[{"resource": "Search", "field": "q",
                                                  "code": "missing"}])
    matches = _matcher(query)
    installation = world.installations[token.installation_id]
    indexed = world.now() - timedelta(seconds=world.settings.search_lag_seconds)
    found: list[Issue] = []
    for (repo_id, _), issue in world.issues.items():
        repo = world.repos[repo_id]
        if not world.installation_has(installation, repo) or (
                token.repository_ids is not None and repo.id not in token.repository_ids):
            continue
        if issue.updated_at > indexed:  # not indexed yet
            continue
        if matches(issue, repo.full_name):
            found.append(issue)
    key = "created_at" if ctx.query.get("sort") == "created" else "updated_at"
    found.sort(key=lambda i: (getattr(i, key), i.id),
               reverse=ctx.query.get("order", "desc") != "asc")
    try:
        per_page = min(max(int(ctx.query.get("per_page", "30")), 1), 100)
        page = max(int(ctx.query.get("page", "1")), 1)
    except ValueError:
        per_page, page = 30, 1
    if (page - 1) * per_page >= MAX_RESULTS:
        raise ApiError(422, "Only the first 1000 search results are available")
    reply = ctx.page(found[:MAX_RESULTS], default=30, maximum=100)
    reply.body = {"total_count": len(found), "incomplete_results": False,
                  "items": [_item(ctx, i) for i in reply.body],
                  "search_type": "lexical"}
    return reply


def _item(ctx: Ctx, issue: Issue) -> dict[str, Any]:
    """A search result: the issue's shape, with the URLs and fields search adds."""
    out = ctx.render.issue(issue)
    return {**out, "labels_url": out["url"] + "/labels{/name}",
            "events_url": out["url"] + "/events", "milestone": None, "score": 1.0}
