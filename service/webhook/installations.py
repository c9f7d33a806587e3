"""Installation deliveries: which repositories the App is installed on.

``installation`` ``created``, ``unsuspend`` and ``new_permissions_accepted`` add the listed
repositories under the installation's id; ``deleted`` and ``suspend`` mark every repository
of the installation removed; ``installation_repositories`` adds ``repositories_added`` and
removes ``repositories_removed``. Applied to the ``repositories`` table inside the caller's
transaction (``service.webhook.deliveries`` records the delivery in the same one).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["InstallationChange", "MalformedInstallation", "change_repositories"]

_REPO: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ADDS: Final = ("created", "unsuspend", "new_permissions_accepted")
_DROPS: Final = ("deleted", "suspend")

_ADD_REPO = (
    "INSERT INTO repositories (repo, installation_id, added_at) VALUES (?, ?, ?)"
    " ON CONFLICT (repo) DO UPDATE SET installation_id = excluded.installation_id,"
    " added_at = CASE WHEN repositories.removed_at IS NULL THEN repositories.added_at"
    " ELSE excluded.added_at END, removed_at = NULL"
)
# Matching the installation keeps a late "removed" from an old installation from dropping
# a repository that has since moved to another one.
_DROP_REPO = (
    "UPDATE repositories SET removed_at = ?"
    " WHERE repo = ? AND installation_id = ? AND removed_at IS NULL"
)
_DROP_INSTALLATION = (
    "UPDATE repositories SET removed_at = ? WHERE installation_id = ? AND removed_at IS NULL"
    " RETURNING repo"
)


@dataclass(frozen=True)
class InstallationChange:
    """What an ``installation`` / ``installation_repositories`` delivery changed."""

    installation_id: int
    action: str
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


class MalformedInstallation(Exception):
    """An installation payload without the fields needed to act on it."""


def _repos(value: object) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedInstallation("a repository list is not an array")
    names = [item.get("full_name") if isinstance(item, Mapping) else None for item in value]
    if not all(isinstance(n, str) and _REPO.fullmatch(n) for n in names):
        raise MalformedInstallation("a repository entry has no 'owner/name' full_name")
    return [str(n) for n in names]


def change_repositories(
    conn: sqlite3.Connection, event: str, payload: Mapping[str, Any], *,
    action: str | None, installation_id: int | None, at: str,
) -> InstallationChange | None:
    """Apply an ``installation`` / ``installation_repositories`` delivery to
    ``repositories`` in ``conn``'s transaction; None for an action it ignores.

    Raises ``MalformedInstallation`` when the payload lacks what is needed to act on it.
    """
    if action is None or installation_id is None:
        raise MalformedInstallation("no action or no installation.id")
    p = payload
    if event == "installation":
        if action in _DROPS:
            dropped = [str(r[0]) for r in conn.execute(_DROP_INSTALLATION, (at, installation_id))]
            return InstallationChange(installation_id, action, removed=tuple(sorted(dropped)))
        if action not in _ADDS:
            return None
        added, removed = _repos(p.get("repositories")), []
    else:
        if action not in ("added", "removed"):
            return None
        added = _repos(p.get("repositories_added"))
        removed = _repos(p.get("repositories_removed"))
    for repo in added:
        conn.execute(_ADD_REPO, (repo, installation_id, at))
    for repo in removed:
        conn.execute(_DROP_REPO, (at, repo, installation_id))
    return InstallationChange(installation_id, action, tuple(added), tuple(removed))
