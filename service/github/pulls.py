"""Pull requests: the one model of a pull request, read from a listing or a detail.

``GET /repos/{o}/{r}/pulls`` (the poller's listing) and ``GET .../pulls/{n}`` (what the
worker and the publisher re-read before they act) describe the same object; both parse
into ``PullRequest``. A listed item carries what the poller decides on (number, state,
draft, head, times); the detail adds what a review needs (base, clone URL, author,
title, body, merged), which a listed pull request leaves at its defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from service.github.actors import Actor
from service.github.names import validate_branch, validate_repo, validate_sha
from service.github.payload import (
    PayloadError,
    github_time,
    mapping,
    positive_int,
    string,
    text,
)

__all__ = ["PullRequest", "parse_listed_pull", "parse_pull", "read_pull"]

_WHERE = "pull_request"


@dataclass(frozen=True)
class PullRequest:
    """A pull request as GitHub described it (head sha lower-case)."""

    number: int
    state: str  # open | closed
    draft: bool
    head_sha: str
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    # The detail's (``parse_pull``); a listed pull request leaves them at these defaults.
    merged: bool = False
    title: str = ""
    body: str = ""
    base_sha: str = ""
    base_ref: str = ""
    clone_url: str = ""
    author_id: int = 0
    author_login: str = ""

    @property
    def open(self) -> bool:
        return self.state == "open"

    def same_as(self, other: PullRequest) -> bool:
        """Nothing a review depends on changed (state, draft, head, closure)."""
        return (self.state, self.draft, self.head_sha, self.closed_at) == (
            other.state, other.draft, other.head_sha, other.closed_at)


def _object(obj: object) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise PayloadError(f"{_WHERE}: expected a JSON object")
    return obj


def _state(obj: Mapping[str, Any]) -> str:
    state = obj.get("state")
    if state not in ("open", "closed"):
        raise PayloadError(f"{_WHERE}.state: expected open or closed, got {state!r}")
    return str(state)


def _head_sha(obj: Mapping[str, Any]) -> str:
    return string(mapping(obj, "head", _WHERE), "sha", f"{_WHERE}.head")


def _closed_at(obj: Mapping[str, Any]) -> datetime | None:
    if obj.get("closed_at") is None:
        return None
    return github_time(obj, "closed_at", _WHERE)


def parse_listed_pull(obj: object) -> PullRequest:
    """A ``GET /pulls`` item; ``PayloadError`` when a field the poller needs is wrong."""
    data = _object(obj)
    return PullRequest(
        number=positive_int(data, "number", _WHERE), state=_state(data),
        draft=data.get("draft") is True, head_sha=_head_sha(data).lower(),
        created_at=github_time(data, "created_at", _WHERE),
        updated_at=github_time(data, "updated_at", _WHERE), closed_at=_closed_at(data))


def parse_pull(obj: object) -> PullRequest:
    """A ``GET /pulls/{n}`` response; ``PayloadError`` (a ``ValueError``) when malformed,
    or when its head, base or branch is not a name git may be given."""
    data = _object(obj)
    base = mapping(data, "base", _WHERE)
    user = mapping(data, "user", _WHERE)
    login = user.get("login")
    return PullRequest(
        number=positive_int(data, "number", _WHERE), state=_state(data),
        draft=bool(data.get("draft")), head_sha=validate_sha(_head_sha(data)),
        created_at=github_time(data, "created_at", _WHERE),
        updated_at=github_time(data, "updated_at", _WHERE), closed_at=_closed_at(data),
        merged=bool(data.get("merged")) or data.get("merged_at") is not None,
        title=text(data, "title", _WHERE),
        body=body if isinstance(body := data.get("body"), str) else "",
        base_sha=validate_sha(string(base, "sha", f"{_WHERE}.base")),
        base_ref=validate_branch(string(base, "ref", f"{_WHERE}.base")),
        clone_url=string(mapping(base, "repo", f"{_WHERE}.base"), "clone_url",
                         f"{_WHERE}.base.repo"),
        author_id=positive_int(user, "id", f"{_WHERE}.user"),
        author_login=login if isinstance(login, str) else "",
    )


class PullReader(Protocol):
    async def get_json(self, actor: Actor, path: str,
                       params: Mapping[str, str | int | bool] | None = None) -> Any: ...


async def read_pull(github: PullReader, installation_id: int, repo: str,
                    number: int) -> PullRequest:
    """Re-read one pull request as the installation."""
    validate_repo(repo)
    return parse_pull(await github.get_json(installation_id, f"/repos/{repo}/pulls/{number}"))
