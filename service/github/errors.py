"""Typed GitHub errors: what went wrong, in a form a caller can act on.

Every error carries the HTTP status, the method and URL *path* of the request (never the
query string, never a header) and GitHub's own ``message`` / ``errors`` /
``documentation_url`` when the response had them. Nothing here ever holds a credential:
the client builds these from the response body and the request line only.

What a caller does with each:

- ``NotFound`` (404, 410): the resource is gone or the App cannot see it; do not retry.
- ``Forbidden`` (403 that is not a rate limit): a missing permission;
  ``accepted_permissions`` says which permissions the endpoint wanted.
- ``Unauthorized`` (401): the App's JWT or an installation token was refused, even after
  one fresh token; usually a clock or key problem.
- ``Unprocessable`` (422): validation failed; ``message`` and ``errors`` say why (for a
  review, one bad inline anchor fails the whole request).
- ``NotAcceptable`` (406): the media type cannot be served; ``too_large`` is GitHub's
  "diff exceeded the maximum" answer, which means "fall back to the files list".
- ``RateLimited``: a limit outlasted the client's patience; ``until`` is when to try again.
- ``ServerError``: 5xx or a connection failure that survived the bounded retries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal


class GitHubError(Exception):
    """Base class: a GitHub request that did not produce the answer asked for."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        method: str = "",
        path: str = "",
        errors: Sequence[Any] = (),
        documentation_url: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self.message = message
        self.status = status
        self.method = method
        self.path = path
        self.errors: tuple[Any, ...] = tuple(errors)
        self.documentation_url = documentation_url
        self.request_id = request_id
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.method} {self.path}".strip()
        status = f"{self.status} " if self.status is not None else ""
        head = f"{status}{where}".strip()
        return f"{head}: {self.message}" if head else self.message


class Unauthorized(GitHubError):
    """401: the App JWT or the installation token was refused."""


class Forbidden(GitHubError):
    """403 that is not a rate limit: the App lacks a permission, or the action is barred."""

    def __init__(
        self, message: str, *, accepted_permissions: str | None = None, **kw: Any
    ) -> None:
        self.accepted_permissions = accepted_permissions
        super().__init__(message, **kw)


class NotFound(GitHubError):
    """404 (or 410 Gone): not there, or not visible to this installation."""


class NotAcceptable(GitHubError):
    """406: the media type cannot be served (for a diff: it is too large)."""

    @property
    def too_large(self) -> bool:
        """GitHub's ``too_large`` code: use ``GET /pulls/{n}/files`` instead of the diff."""
        return any(
            isinstance(item, Mapping) and item.get("code") == "too_large" for item in self.errors
        ) or "exceeded the maximum" in self.message


class Unprocessable(GitHubError):
    """422: GitHub validated the request and refused it; see ``message`` and ``errors``."""


class RateLimited(GitHubError):
    """A primary or secondary rate limit that outlasted the bounded waits.

    ``until`` is an aware UTC datetime: the earliest moment a retry makes sense.
    """

    def __init__(
        self,
        message: str,
        *,
        until: datetime,
        kind: Literal["primary", "secondary"],
        resource: str | None = None,
        **kw: Any,
    ) -> None:
        self.until = until
        self.kind = kind
        self.resource = resource
        super().__init__(message, **kw)

    def _render(self) -> str:
        return f"{super()._render()} (retry after {self.until.isoformat()})"


class ServerError(GitHubError):
    """5xx, or a connection failure (``status is None``), after the bounded retries."""


def error_for_status(
    status: int,
    message: str,
    *,
    accepted_permissions: str | None = None,
    **kw: Any,
) -> GitHubError:
    """The typed error for a non-rate-limit failure status (pure; no I/O)."""
    if status == 401:
        return Unauthorized(message, status=status, **kw)
    if status == 403:
        return Forbidden(message, status=status, accepted_permissions=accepted_permissions, **kw)
    if status in (404, 410):
        return NotFound(message, status=status, **kw)
    if status == 406:
        return NotAcceptable(message, status=status, **kw)
    if status == 422:
        return Unprocessable(message, status=status, **kw)
    if status >= 500:
        return ServerError(message, status=status, **kw)
    return GitHubError(message, status=status, **kw)
