"""Installation deliveries: which repositories the App is installed on.

``installation`` ``created``, ``unsuspend`` and ``new_permissions_accepted`` add the listed
repositories under the installation's id; ``deleted`` and ``suspend`` mark every repository
of the installation removed; ``installation_repositories`` adds ``repositories_added`` and
removes ``repositories_removed``. Applied to the ``repositories`` table inside the caller's
transaction (``service.intake.webhook.deliveries`` records the delivery in the same one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from service.storage import repositories
from service.storage.database import Transaction

__all__ = ["InstallationChange", "MalformedInstallation", "change_repositories"]

_REPO: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_ADDS: Final = ("created", "unsuspend", "new_permissions_accepted")
_DROPS: Final = ("deleted", "suspend")

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
    tx: Transaction, event: str, payload: Mapping[str, Any], *,
    action: str | None, installation_id: int | None, at: datetime,
) -> InstallationChange | None:
    """Apply an ``installation`` / ``installation_repositories`` delivery to
    ``repositories`` in ``tx``; None for an action it ignores.

    Raises ``MalformedInstallation`` when the payload lacks what is needed to act on it.
    """
    if action is None or installation_id is None:
        raise MalformedInstallation("no action or no installation.id")
    p = payload
    if event == "installation":
        if action in _DROPS:
            dropped = repositories.drop_installation(tx, installation_id, at)
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
        repositories.add(tx, repo, installation_id, at)
    for repo in removed:
        repositories.drop(tx, repo, installation_id, at)
    return InstallationChange(installation_id, action, tuple(added), tuple(removed))
