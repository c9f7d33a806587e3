"""Who may trigger the agent: allowed people, never bots, never the App itself.

Self-loop protection has three independent signs because each can fail alone: the
``{slug}[bot]`` login (what GitHub shows as the author of the App's comments), the
comment's ``performed_via_github_app.id`` (also set when the App acts through a user's
token), and the publisher's own record of comment ids (``agent_comments``), which still
works if the App is renamed. Any one of them is enough to ignore a comment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from service.config.schema import TriggersConfig

from .decisions import TriggerContext


def login_of(user: Mapping[str, Any] | None) -> str:
    """The account's login, or ``""`` when absent (a deleted "ghost" account)."""
    if user is None:
        return ""
    login = user.get("login")
    return login if isinstance(login, str) else ""


def is_bot(user: Mapping[str, Any] | None) -> bool:
    """A bot account: ``type`` ``Bot``, or a login ending in ``[bot]`` (any case)."""
    if user is None:
        return False
    return user.get("type") == "Bot" or login_of(user).lower().endswith("[bot]")


def is_own_app(
    user: Mapping[str, Any] | None,
    app: Mapping[str, Any] | None,
    ctx: TriggerContext,
) -> bool:
    """The App itself: its ``[bot]`` login, or ``performed_via_github_app`` is our App."""
    if login_of(user).lower() == ctx.bot_login.lower():
        return True
    if app is None:
        return False
    app_id = app.get("id")
    return isinstance(app_id, int) and not isinstance(app_id, bool) and app_id == ctx.app_id


def is_allowed_author(
    user: Mapping[str, Any] | None,
    author_association: object,
    config: TriggersConfig,
) -> bool:
    """Whether this author may trigger: an allowed association or a listed login.

    Associations compare upper-cased (GitHub sends ``OWNER``, ``MEMBER``, ...) and
    logins case-insensitively, as GitHub treats them. This does not check for bots;
    a bot never triggers even when listed (``classify`` checks that first).
    """
    if isinstance(author_association, str) and author_association:
        allowed = {value.upper() for value in config.allowed_associations}
        if author_association.upper() in allowed:
            return True
    login = login_of(user).lower()
    return bool(login) and login in {name.lower() for name in config.allowed_users}
