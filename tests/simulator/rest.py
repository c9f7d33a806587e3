"""HTTP conventions of GitHub's REST API: error bodies, pagination, ETags, dates.

ETags follow the reverse-engineered rule (see GITHUB-PLATFORM.md §5): a weak ETag over
SHA-256 of the ``Accept`` and ``Authorization`` header values and the body, so the same
content fetched with a different token (or media type) has a different ETag, as on GitHub.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

T = TypeVar("T")

DOCS = "https://docs.github.com/rest"
API_VERSION = "2022-11-28"


class ApiError(Exception):
    """An error answer: GitHub's ``{"message", "documentation_url", "status"}`` body."""

    def __init__(self, status: int, message: str, *, errors: list[Any] | None = None,
                 headers: dict[str, str] | None = None, documentation_url: str = DOCS) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = dict(headers or {})
        self.documentation_url = documentation_url

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message}
        if self.errors is not None:
            out["errors"] = self.errors
        out["documentation_url"] = self.documentation_url
        out["status"] = str(self.status)
        return out


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def unprocessable(*errors: Any, documentation_url: str = DOCS) -> ApiError:
    return ApiError(422, "Unprocessable Entity", errors=list(errors),
                    documentation_url=documentation_url)


def missing_field(resource: str, field: str) -> ApiError:
    return ApiError(422, "Validation Failed",
                    errors=[{"resource": resource, "code": "missing_field", "field": field}])


def dump_json(value: Any) -> bytes:
    """GitHub's compact JSON encoding."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def etag_for(accept: str | None, authorization: str | None, body: bytes) -> str:
    digest = hashlib.sha256()
    for header in (accept, authorization):
        if header:
            digest.update(header.encode("latin-1") + b":")
    digest.update(body)
    return f'W/"{digest.hexdigest()}"'


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Weak comparison, as HTTP prescribes for If-None-Match."""
    want = etag.removeprefix("W/")
    for raw in if_none_match.split(","):
        candidate = raw.strip()
        if candidate == "*" or candidate.removeprefix("W/") == want:
            return True
    return False


def http_date(value: datetime) -> str:
    return format_datetime(value.astimezone(UTC), usegmt=True)


def parse_http_date(value: str) -> datetime | None:
    try:
        parsed = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def page_params(query: dict[str, str], *, default: int = 30, maximum: int = 100) -> tuple[int, int]:
    """(page, per_page) with GitHub's leniency: bad values fall back, per_page is capped."""
    def number(name: str, fallback: int) -> int:
        try:
            return int(query.get(name, fallback))
        except ValueError:
            return fallback

    per_page = min(max(number("per_page", default), 1), maximum)
    return max(number("page", 1), 1), per_page


def paginate(items: Sequence[T], *, url: str, query: dict[str, str], default: int = 30,
             maximum: int = 100) -> tuple[list[T], str | None]:
    """The requested page and a ``Link`` header (first/prev/next/last, as GitHub sends)."""
    page, per_page = page_params(query, default=default, maximum=maximum)
    last = max(1, -(-len(items) // per_page))
    chunk = list(items[(page - 1) * per_page : page * per_page])

    def link(number: int, rel: str) -> str:
        params = {**query, "page": str(number)}
        return f'<{url}?{urlencode(params)}>; rel="{rel}"'

    links: list[str] = []
    if page > 1:
        links += [link(min(page - 1, last), "prev"), link(1, "first")]
    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    # GitHub's order is prev, next, last, first; clients must not depend on it.
    order = {"prev": 0, "next": 1, "last": 2, "first": 3}
    links.sort(key=lambda item: order[item.rsplit('rel="', 1)[1].rstrip('"')])
    return chunk, ", ".join(links) if links else None
