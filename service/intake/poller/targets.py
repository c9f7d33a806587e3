"""Which repositories to poll, as which installation, and the ``repositories`` table.

The App sees what it is installed on: ``GET /app/installations`` (as the App), then
``GET /installation/repositories`` for each installation (as that installation). When
``github.repositories`` is set, only those are polled; the repository's name is always
taken from GitHub's listing, because the dedupe keys and watermark names must be spelt
exactly as the webhook payloads spell ``repository.full_name``.

Every repository found is recorded in ``repositories`` (``repo``, ``installation_id``,
``added_at``, ``removed_at``); one that an installation no longer lists, or whose
installation is gone, gets ``removed_at``. A listing that failed changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.installations import (
    Repository,
    list_installation_repositories,
    list_installations,
)
from service.storage import repositories
from service.storage.database import Database

log = logging.getLogger(__name__)

@dataclass(frozen=True, order=True)
class Target:
    """One repository to poll, and the installation whose token reads it."""

    installation_id: int
    repo: str


@dataclass
class Discovery:
    """What one refresh learned.

    ``installations``: every installation listed (suspended ones included), or ``None``
    when the listing itself failed. ``repositories``: per installation whose repositories
    were listed, what it can see. ``failures``: what could not be listed, and why.
    """

    installations: set[int] | None = None
    #: Each installation's account and its type (``Organization`` or ``User``).
    accounts: dict[int, tuple[str, str]] = field(default_factory=dict)
    suspended: set[int] = field(default_factory=set)
    repositories: dict[int, list[Repository]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.installations is not None and not self.failures


async def discover(client: GitHubClient) -> Discovery:
    """List every installation and the repositories of each that is not suspended.

    A failure is recorded, not raised: one installation that cannot be listed must not
    stop the others from being polled.
    """
    found = Discovery()
    try:
        installations = [i async for i in list_installations(client)]
    except GitHubError as exc:
        found.failures["installations"] = str(exc)
        log.warning("could not list the App's installations", extra={"error": str(exc)})
        return found
    found.installations = {i.id for i in installations}
    found.accounts = {i.id: (i.account, i.account_type) for i in installations}
    for installation in installations:
        if installation.suspended:
            found.suspended.add(installation.id)
            continue
        try:
            found.repositories[installation.id] = [
                r async for r in list_installation_repositories(client, installation.id)]
        except GitHubError as exc:
            found.failures[f"installation {installation.id}"] = str(exc)
            log.warning("could not list an installation's repositories",
                        extra={"installation_id": installation.id, "error": str(exc)})
    return found


def select_targets(
    found: Discovery, allowlist: Collection[str], previous: Sequence[Target],
) -> list[Target]:
    """The repositories to poll after ``found``, sorted by installation and name.

    Archived repositories are skipped (nothing new can happen in them). An installation
    whose listing failed keeps the targets it had; one that is gone or suspended loses
    them; if even the installations could not be listed, nothing changes.
    """
    if found.installations is None:
        return sorted(previous)
    wanted = {name.casefold() for name in allowlist}
    targets = {
        Target(installation_id, repo.full_name)
        for installation_id, repos in found.repositories.items()
        for repo in repos
        if not repo.archived and (not wanted or repo.full_name.casefold() in wanted)
    }
    for target in previous:
        installation = target.installation_id
        if (installation in found.installations and installation not in found.suspended
                and installation not in found.repositories):
            targets.add(target)
    return sorted(targets)


def missing_from(targets: Sequence[Target], allowlist: Collection[str]) -> list[str]:
    """Configured repositories that no installation can see (a typo, or not installed)."""
    polled = {t.repo.casefold() for t in targets}
    return sorted(name for name in allowlist if name.casefold() not in polled)


@dataclass(frozen=True)
class Recorded:
    added: list[str]
    removed: list[str]


def record_repositories(store: Database, found: Discovery, now: datetime) -> Recorded:
    """Bring ``repositories`` up to date with ``found`` in one transaction (blocking)."""
    added: list[str] = []
    removed: list[str] = []
    with store.transaction() as conn:
        live = repositories.live(conn)
        listed: set[str] = set()
        for installation_id, repos in found.repositories.items():
            for found_repo in repos:
                listed.add(found_repo.full_name)
                if live.get(found_repo.full_name) != installation_id:
                    added.append(found_repo.full_name)
                repositories.add(conn, found_repo.full_name, installation_id, now)
        for repo, installation_id in live.items():
            # Dropped: its installation was listed and no longer shows it. Gone: its
            # installation is no longer there at all.
            dropped = installation_id in found.repositories
            gone = (found.installations is not None
                    and installation_id not in found.installations)
            if repo not in listed and (dropped or gone):
                removed.append(repo)
                repositories.remove(conn, repo, now)
    for repo in added:
        log.info("repository recorded", extra={"repo": repo})
    for repo in removed:
        log.info("repository no longer installed", extra={"repo": repo})
    return Recorded(added=sorted(added), removed=sorted(removed))
