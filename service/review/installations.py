"""Which installation of the App covers a repository: the store first, GitHub once."""

from __future__ import annotations

import logging

from service.github.client import GitHubClient
from service.github.installations import find_repository_installation
from service.github.names import validate_repo
from service.storage import repositories
from service.storage.database import Database

log = logging.getLogger(__name__)


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
