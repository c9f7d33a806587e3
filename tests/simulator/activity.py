"""What people do on GitHub, as ``World`` methods: each change emits the webhook GitHub
would send (``synchronize``, ``ready_for_review``, ``closed``, ``edited``…), built by the
same payload code the REST API uses."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from .events import changes_from
from .models import IssueComment, PullRequest, Revision, User

if TYPE_CHECKING:
    from .events import EmittedEvent, WebhookPayloads
    from .models import Issue, Repository


class Activity:
    """Mixed into ``World``, which provides everything declared below."""

    if TYPE_CHECKING:
        issue_comments: dict[int, IssueComment]

        @property
        def payloads(self) -> WebhookPayloads: ...
        def now(self) -> datetime: ...
        def user(self, login: str) -> User: ...
        def repo(self, full_name: str) -> Repository: ...
        def pull(self, repo: str, number: int) -> PullRequest: ...
        def touch(self, issue: Issue) -> None: ...
        def emit(self, event: str, payload: dict[str, Any]) -> EmittedEvent: ...
        def _revision(self, repo: Repository, head_sha: str, base_sha: str, diff: str | None,
                      commits: int | None) -> Revision: ...
        @staticmethod
        def _track_pull_ref(repo: Repository, number: int, head_sha: str, *,
                            computed: bool) -> None: ...

    def push(self, repo: str, number: int, *, head_sha: str, diff: str | None = None,
             base_sha: str | None = None, commits: int | None = None,
             sender: str | None = None) -> Revision:
        """New commits (or a force-push) on the PR's head branch: ``synchronize``."""
        pr = self.pull(repo, number)
        before = pr.head.head_sha
        revision = self._revision(self.repo(repo), head_sha, base_sha or pr.head.base_sha, diff,
                                  commits)
        pr.revisions.append(revision)
        self._track_pull_ref(self.repo(repo), number, head_sha, computed=diff is None)
        self.touch(pr.issue)
        self.repo(repo).pushed_at = self.now()
        who = self.user(sender) if sender else pr.issue.user
        self.emit("pull_request", self.payloads.pull_request(
            "synchronize", pr, sender=who, before=before, after=head_sha))
        return revision

    def set_draft(self, repo: str, number: int, draft: bool, *,
                  sender: str | None = None) -> None:
        pr = self.pull(repo, number)
        pr.draft = draft
        self.touch(pr.issue)
        action = "converted_to_draft" if draft else "ready_for_review"
        who = self.user(sender) if sender else pr.issue.user
        self.emit("pull_request", self.payloads.pull_request(action, pr, sender=who))

    def close(self, repo: str, number: int, *, merged: bool = False,
              sender: str | None = None) -> None:
        pr = self.pull(repo, number)
        who = self.user(sender) if sender else pr.issue.user
        pr.issue.state, pr.issue.closed_at = "closed", self.now()
        if merged:
            pr.merged_at, pr.merged_by = self.now(), who
        self.touch(pr.issue)
        self.emit("pull_request", self.payloads.pull_request("closed", pr, sender=who))

    def reopen(self, repo: str, number: int, *, sender: str | None = None) -> None:
        pr = self.pull(repo, number)
        if pr.merged_at is not None:
            raise ValueError("a merged pull request cannot be reopened")
        pr.issue.state, pr.issue.closed_at = "open", None
        self.touch(pr.issue)
        who = self.user(sender) if sender else pr.issue.user
        self.emit("pull_request", self.payloads.pull_request("reopened", pr, sender=who))

    def edit_pull(self, repo: str, number: int, *, title: str | None = None,
                  body: str | None = None, sender: User | None = None) -> PullRequest:
        pr = self.pull(repo, number)
        changes: dict[str, Any] = {}
        if title is not None and title != pr.issue.title:
            changes.update(changes_from("title", pr.issue.title))
            pr.issue.title = title
        if body is not None and body != pr.issue.body:
            changes.update(changes_from("body", pr.issue.body))
            pr.issue.body = body
        if changes:
            self.touch(pr.issue)
            self.emit("pull_request", self.payloads.pull_request(
                "edited", pr, sender=sender or pr.issue.user, changes=changes))
        return pr


    def edit_issue_comment(self, comment: IssueComment, body: str, *,
                           sender: User | None = None) -> IssueComment:
        old = comment.body
        comment.body, comment.updated_at = body, self.now()
        self.emit("issue_comment", self.payloads.issue_comment(
            "edited", comment, sender=sender or comment.user, changes=changes_from("body", old)))
        return comment

    def delete_issue_comment(self, comment: IssueComment, *,
                             sender: User | None = None) -> None:
        payload = self.payloads.issue_comment("deleted", comment, sender=sender or comment.user)
        del self.issue_comments[comment.id]
        self.emit("issue_comment", payload)

