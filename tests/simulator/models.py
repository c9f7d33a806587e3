"""The simulated GitHub's objects: plain mutable records the ``World`` owns.

They hold facts, not JSON: ``payloads.py`` renders them in GitHub's REST and webhook
shapes, so the REST API and the webhooks the world emits always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from .diffs import FileDiff

PERMISSION_LEVELS = {"read": 1, "write": 2, "admin": 3}
REACTION_CONTENTS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


@dataclass
class User:
    login: str
    id: int
    type: str = "User"  # User | Bot | Organization
    association: str = "NONE"  # author_association on content this user writes
    site_admin: bool = False


@dataclass
class App:
    id: int
    slug: str
    name: str
    owner: User
    bot: User  # the "<slug>[bot]" account the App writes as
    public_key_pem: bytes | None
    client_id: str
    client_secret: str | None = field(repr=False)
    webhook_secret: str | None = field(repr=False)
    permissions: dict[str, str]
    events: list[str]
    description: str
    created_at: datetime
    updated_at: datetime


@dataclass
class Installation:
    id: int
    app_id: int
    account: User
    repository_selection: str  # "all" | "selected"
    repository_ids: set[int]  # only meaningful when selection is "selected"
    permissions: dict[str, str]
    events: list[str]
    created_at: datetime
    updated_at: datetime
    suspended_at: datetime | None = None


@dataclass
class Repository:
    id: int
    owner: User
    name: str
    private: bool
    default_branch: str
    created_at: datetime
    updated_at: datetime
    pushed_at: datetime
    git_dir: Path | None = None  # a repository on disk that can be cloned
    #: The default branch's files, for a repository without ``git_dir`` (the contents
    #: API serves a ``git_dir`` repository's files from git itself, at any ref).
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner.login}/{self.name}"


@dataclass
class Reaction:
    id: int
    user: User
    content: str
    created_at: datetime


@dataclass
class Issue:
    """An issue; every pull request also has one (they share the number space)."""

    id: int
    repo_id: int
    number: int
    title: str
    body: str | None
    user: User
    state: str  # open | closed
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    locked: bool = False
    reactions: list[Reaction] = field(default_factory=list)
    is_pull: bool = False


@dataclass
class Revision:
    """One head of a pull request: what the diff was while ``head_sha`` was the head."""

    head_sha: str
    base_sha: str
    diff: str
    files: tuple[FileDiff, ...]
    pushed_at: datetime
    commits: int = 1


@dataclass
class PullRequest:
    id: int
    issue: Issue
    head_ref: str
    base_ref: str
    draft: bool
    revisions: list[Revision]
    merged_at: datetime | None = None
    merged_by: User | None = None
    head_repo_id: int | None = None  # a fork; None means the base repository
    maintainer_can_modify: bool = False

    @property
    def number(self) -> int:
        return self.issue.number

    @property
    def head(self) -> Revision:
        return self.revisions[-1]

    def revision(self, sha: str) -> Revision | None:
        for rev in reversed(self.revisions):
            if rev.head_sha == sha:
                return rev
        return None


@dataclass
class IssueComment:
    id: int
    repo_id: int
    issue_number: int
    user: User
    body: str
    created_at: datetime
    updated_at: datetime
    app_id: int | None = None  # performed_via_github_app
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class Review:
    id: int
    repo_id: int
    pull_number: int
    user: User
    body: str
    state: str  # PENDING | COMMENTED | APPROVED | CHANGES_REQUESTED | DISMISSED
    commit_id: str
    submitted_at: datetime | None
    app_id: int | None = None


@dataclass
class ReviewComment:
    id: int
    repo_id: int
    pull_number: int
    review_id: int
    user: User
    body: str
    path: str
    line: int | None
    side: str
    start_line: int | None
    start_side: str | None
    commit_id: str
    original_commit_id: str
    diff_hunk: str
    position: int | None
    created_at: datetime
    updated_at: datetime
    in_reply_to_id: int | None = None
    app_id: int | None = None
    reactions: list[Reaction] = field(default_factory=list)


@dataclass
class CheckRun:
    """A check run an App created on a commit (``POST /repos/{o}/{r}/check-runs``)."""

    id: int
    repo_id: int
    app_id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    external_id: str | None
    details_url: str | None
    title: str | None
    summary: str | None
    text: str | None
    started_at: datetime
    completed_at: datetime | None
    check_suite_id: int
    history: list[tuple[str, str | None]] = field(default_factory=list)  # (status, conclusion)


@dataclass
class Token:
    """An installation access token. ``value`` is the secret; never log it."""

    value: str = field(repr=False)
    app_id: int
    installation_id: int
    created_at: datetime
    expires_at: datetime
    permissions: dict[str, str]
    repository_ids: set[int] | None  # None: every repository of the installation
    revoked: bool = False


@dataclass
class ManifestCode:
    code: str = field(repr=False)
    manifest: dict[str, Any]
    created_at: datetime
    used: bool = False
    owner: str | None = None  # the organisation it is registered for (None: the user's)
