"""Webhook payloads in GitHub's shapes, and the events the simulated world emits.

``WebhookPayloads`` builds the body GitHub would deliver to an App for each event; the
``World`` uses the same builders when something happens in it (the App posts a comment,
a test pushes a commit), appending an ``EmittedEvent`` that a ``WebhookSender`` can
deliver. Common fields follow GitHub: ``action``, ``sender``, ``repository``,
``organization`` (only for organization-owned repositories) and ``installation``
(``{"id", "node_id"}``, present because the event is delivered to an App).
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .clock import iso
from .payloads import Json, Renderer, node_id

if TYPE_CHECKING:
    from .models import (
        Installation,
        IssueComment,
        PullRequest,
        Repository,
        Review,
        ReviewComment,
        User,
    )
    from .state import World

ZEN = "Design for failure."


@dataclass
class EmittedEvent:
    """An event the world produced, ready to be delivered by a ``WebhookSender``."""

    event: str
    payload: Json
    installation_id: int | None
    at: datetime
    delivery_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    #: Sent again, under its first delivery's id (``POST …/deliveries/{id}/attempts``).
    redelivery: bool = False

    @property
    def action(self) -> str | None:
        action = self.payload.get("action")
        return action if isinstance(action, str) else None


class WebhookPayloads:
    """Builders for each event a PR reviewer App receives."""

    def __init__(self, world: World, *, api: str | None = None, web: str | None = None) -> None:
        self.world = world
        self.render = Renderer(world, api=api or world.api_url, web=web or world.web_url)

    # -- common parts -----------------------------------------------------------------
    def _common(self, repo: Repository | None, sender: User | None,
                installation: Installation | None) -> Json:
        out: Json = {}
        if repo is not None:
            out["repository"] = self.render.repo(repo)
            if repo.owner.type == "Organization":
                owner = repo.owner
                out["organization"] = {
                    "login": owner.login, "id": owner.id, "node_id": node_id("O", owner.id),
                    "url": f"{self.render.api}/orgs/{owner.login}", "description": "",
                    "avatar_url": f"https://avatars.githubusercontent.com/u/{owner.id}?v=4",
                }
        if sender is not None:
            out["sender"] = self.render.user(sender)
        if installation is None and repo is not None:
            installation = self.world.installation_for(repo)
        if installation is not None:
            legacy = f"023:IntegrationInstallation{installation.id}".encode()
            out["installation"] = {"id": installation.id,
                                   "node_id": base64.b64encode(legacy).decode()}
        return out

    # -- repository events --------------------------------------------------------------
    def pull_request(self, action: str, pr: PullRequest, *, sender: User | None = None,
                     before: str | None = None, after: str | None = None,
                     changes: Json | None = None) -> Json:
        """``pull_request``: opened, reopened, ready_for_review, converted_to_draft,
        synchronize (give ``before``/``after``), closed, edited (give ``changes``)."""
        repo = self.world.repos[pr.issue.repo_id]
        out: Json = {"action": action, "number": pr.number,
                     "pull_request": self.render.pull(pr, full=True)}
        if action == "synchronize":
            out["before"] = before
            out["after"] = after if after is not None else pr.head.head_sha
        if changes is not None:
            out["changes"] = changes
        out.update(self._common(repo, sender or pr.issue.user, None))
        return out

    def issue_comment(self, action: str, comment: IssueComment, *, sender: User | None = None,
                      changes: Json | None = None) -> Json:
        """``issue_comment``: created, edited (give ``changes``), deleted. The ``issue``
        carries ``pull_request`` only when the comment is on a pull request."""
        repo = self.world.repos[comment.repo_id]
        issue = self.world.issues[(repo.id, comment.issue_number)]
        out: Json = {"action": action, "issue": self.render.issue(issue),
                     "comment": self.render.issue_comment(comment)}
        if changes is not None:
            out["changes"] = changes
        out.update(self._common(repo, sender or comment.user, None))
        return out

    def pull_request_review_comment(self, action: str, comment: ReviewComment, *,
                                    sender: User | None = None,
                                    changes: Json | None = None) -> Json:
        repo = self.world.repos[comment.repo_id]
        pr = self.world.pulls[(repo.id, comment.pull_number)]
        out: Json = {"action": action, "comment": self.render.review_comment(comment),
                     "pull_request": self.render.pull(pr, full=False)}
        if changes is not None:
            out["changes"] = changes
        out.update(self._common(repo, sender or comment.user, None))
        return out

    def pull_request_review(self, action: str, review: Review, *,
                            sender: User | None = None) -> Json:
        repo = self.world.repos[review.repo_id]
        pr = self.world.pulls[(repo.id, review.pull_number)]
        out: Json = {"action": action, "review": self.render.review(review),
                     "pull_request": self.render.pull(pr, full=False)}
        out.update(self._common(repo, sender or review.user, None))
        return out

    # -- App events ------------------------------------------------------------------------
    def installation(self, action: str, installation: Installation, *,
                     sender: User | None = None) -> Json:
        """``installation``: created, deleted, suspend, unsuspend, new_permissions_accepted."""
        repos = self.world.installation_repos(installation)
        out: Json = {
            "action": action,
            "installation": self.render.installation(installation, epoch_times=True),
            "repositories": [self.render.repo_min(r) for r in repos],
            "requester": None,
        }
        out.update(self._common(None, sender or installation.account, None))
        return out

    def installation_repositories(self, action: str, installation: Installation, *,
                                  added: list[Repository] | None = None,
                                  removed: list[Repository] | None = None,
                                  sender: User | None = None) -> Json:
        """``installation_repositories``: added, removed."""
        out: Json = {
            "action": action,
            "installation": self.render.installation(installation, epoch_times=True),
            "repository_selection": installation.repository_selection,
            "repositories_added": [self.render.repo_min(r) for r in added or []],
            "repositories_removed": [self.render.repo_min(r) for r in removed or []],
            "requester": None,
        }
        out.update(self._common(None, sender or installation.account, None))
        return out

    def ping(self, *, hook_id: int, url: str, app_id: int | None = None,
             events: list[str] | None = None) -> Json:
        app = self.world.apps[app_id] if app_id is not None else self.world.app
        now = self.world.clock.now()
        return {
            "zen": ZEN,
            "hook_id": hook_id,
            "hook": {
                "type": "App", "id": hook_id, "name": "web", "active": True,
                "events": list(events if events is not None else app.events),
                "config": {"content_type": "json", "insecure_ssl": "0", "url": url},
                "updated_at": iso(now), "created_at": iso(now), "app_id": app.id,
                "deliveries_url": f"{self.render.api}/app/hook/deliveries",
            },
            "sender": self.render.user(app.owner),
        }


def changes_from(field_name: str, old: Any) -> Json:
    """The ``changes`` object of an ``edited`` action: ``{"body": {"from": old}}``."""
    return {field_name: {"from": old}}
