"""The pull request as the worker re-reads it, and the installation that covers a repository.

A queue row can be minutes or hours old by the time it is claimed, so the worker asks
GitHub again (``GET /repos/{o}/{r}/pulls/{n}``) before spending anything: the pull request
may have closed, or its head moved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from service.github import GitHubClient, find_repository_installation
from service.storage import Database, repositories
from service.worker.checkout import validate_branch, validate_repo, validate_sha

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class PullState:
    """What the worker needs to know about a pull request right now."""

    number: int
    open: bool
    merged: bool
    draft: bool
    title: str
    body: str
    head_sha: str
    base_sha: str
    base_ref: str
    clone_url: str
    author_id: int


def _get(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"pull request response: {where}{key} is not a {kind.__name__}")
    return value


def parse_pull(data: Any) -> PullState:
    """A ``GET /pulls/{n}`` response as a ``PullState`` (ValueError when malformed)."""
    if not isinstance(data, Mapping):
        raise ValueError("pull request response is not a JSON object")
    head = _get(data, "head", Mapping, "")
    base = _get(data, "base", Mapping, "")
    base_repo = _get(base, "repo", Mapping, "base.")
    user = _get(data, "user", Mapping, "")
    body = data.get("body")
    return PullState(
        number=_get(data, "number", int, ""),
        open=_get(data, "state", str, "") == "open",
        merged=bool(data.get("merged")) or data.get("merged_at") is not None,
        draft=bool(data.get("draft")),
        title=_get(data, "title", str, ""),
        body=body if isinstance(body, str) else "",
        head_sha=validate_sha(_get(head, "sha", str, "head.")),
        base_sha=validate_sha(_get(base, "sha", str, "base.")),
        base_ref=validate_branch(_get(base, "ref", str, "base.")),
        clone_url=_get(base_repo, "clone_url", str, "base.repo."),
        author_id=_get(user, "id", int, "user."),
    )


async def read_pull(github: GitHubClient, installation_id: int, repo: str,
                    number: int) -> PullState:
    """Re-read one pull request as the installation."""
    validate_repo(repo)
    data = await github.get_json(installation_id, f"/repos/{repo}/pulls/{number}")
    return parse_pull(data)


class Installations:
    """Which installation of the App covers a repository.

    The ``repositories`` table (kept by installation webhooks) answers first; a repository
    it does not know is looked up once with ``GET /repos/{o}/{r}/installation`` (the App
    JWT) and remembered for the life of the process.
    """

    def __init__(self, store: Database, github: GitHubClient) -> None:
        self._store = store
        self._github = github
        self._found: dict[str, int] = {}

    async def __call__(self, repo: str) -> int:
        owner, name = validate_repo(repo)
        known = await self._store.run(self._from_store, repo)
        if known is not None:
            return known
        if repo not in self._found:
            self._found[repo] = await find_repository_installation(self._github, owner, name)
            log.info("installation found through GitHub", extra={
                "repo": repo, "installation_id": self._found[repo]})
        return self._found[repo]

    def _from_store(self, repo: str) -> int | None:
        with self._store.read() as tx:
            return repositories.installation_of(tx, repo)
