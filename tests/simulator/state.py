"""The in-memory world of the simulated GitHub, and the changes GitHub itself would make.

A test builds or seeds a ``World`` (``seed.py`` loads one from JSON), hands its
``SimulatorTransport`` to the client under test, then inspects it: ``world.requests``
(everything received), ``world.events`` (the webhooks the world would have sent),
``world.faults`` (what to break), ``world.clock`` (what time GitHub thinks it is).

The world is single-threaded: in-process it lives on the test's event loop, standalone
on uvicorn's. Mutations by the REST handlers and by test helpers emit the same webhook
payloads (``events.py``), so "the App posted a comment" and "a human pushed" look to a
webhook receiver exactly as on GitHub. Those GitHub-side activities (push, draft, close,
edit) live in ``activity.py`` and the App-manifest flow in ``manifest.py``, mixed in here.
"""

from __future__ import annotations

import itertools
import secrets
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from .activity import Activity
from .auth import make_token_value
from .clock import SimClock
from .diffs import parse_diff
from .events import EmittedEvent, WebhookPayloads
from .faults import FaultSchedule
from .git import GitRepo, commit_count, diff_between, set_pull_ref
from .hook_log import HookLog
from .limits import RateLimiter
from .manifest import ManifestFlow
from .models import (
    App,
    CheckRun,
    Installation,
    Issue,
    IssueComment,
    ManifestCode,
    PullRequest,
    Repository,
    Review,
    ReviewComment,
    Revision,
    Token,
    User,
)
from .records import RequestLog
from .settings import Settings

DEFAULT_APP_PERMISSIONS = {"pull_requests": "write", "issues": "write", "contents": "read",
                           "metadata": "read", "checks": "write"}
DEFAULT_APP_EVENTS = ["pull_request", "issue_comment", "pull_request_review_comment",
                      "pull_request_review", "pull_request_review_thread"]


class World(Activity, ManifestFlow):
    """Every object of the simulated GitHub, its clock, limits, faults and logs."""

    def __init__(self, *, settings: Settings | None = None, clock: SimClock | None = None,
                 api_url: str = "https://api.github.com",
                 web_url: str = "https://github.com") -> None:
        self.settings = settings or Settings()
        self.clock = clock or SimClock()
        self.api_url = api_url  # used in webhook payloads; REST uses the request's base
        self.web_url = web_url
        self.faults = FaultSchedule()
        self.requests = RequestLog()
        self.limiter = RateLimiter(self.settings, self._bucket_repositories)
        self.events: list[EmittedEvent] = []
        self.hook_log = HookLog(self.clock)  # every delivery attempt (``hook_log.py``)
        self.apps: dict[int, App] = {}
        self.users: dict[str, User] = {}
        self.installations: dict[int, Installation] = {}
        self.repos: dict[int, Repository] = {}
        self._by_name: dict[str, Repository] = {}
        self.issues: dict[tuple[int, int], Issue] = {}
        # Each repository's issues: a repository's payload counts its open ones, and an
        # installation of 10,000 repositories must not scan every issue per repository.
        self.issues_of: dict[int, list[Issue]] = {}
        self.pulls: dict[tuple[int, int], PullRequest] = {}
        self.issue_comments: dict[int, IssueComment] = {}
        self.review_comments: dict[int, ReviewComment] = {}
        self.reviews: dict[int, Review] = {}
        self.check_runs: dict[int, CheckRun] = {}
        #: Resolved review threads (GraphQL): the root comment's id -> who resolved it.
        self.thread_resolutions: dict[int, User] = {}
        self.tokens: dict[str, Token] = {}
        self.manifest_codes: dict[str, ManifestCode] = {}
        self._ids = itertools.count(1_000_001)

    def _bucket_repositories(self, key: str) -> int:
        """How many repositories the installation a rate-limit bucket belongs to has."""
        ident = key.split(":")[1]
        installation = self.installations.get(int(ident)) if ident.isdigit() else None
        return 0 if installation is None else len(self.installation_repos(installation))

    # -- basics ----------------------------------------------------------------------------
    def next_id(self) -> int:
        return next(self._ids)

    def now(self) -> datetime:
        return self.clock.now()

    @property
    def payloads(self) -> WebhookPayloads:
        return WebhookPayloads(self)

    def emit(self, event: str, payload: dict[str, Any]) -> EmittedEvent:
        """Record an event GitHub would deliver to the App's webhook."""
        installation = payload.get("installation")
        inst_id = installation.get("id") if isinstance(installation, dict) else None
        emitted = EmittedEvent(event=event, payload=payload, installation_id=inst_id,
                               at=self.now())
        self.events.append(emitted)
        return emitted

    def redeliver(self, event: str, payload: dict[str, Any], guid: str) -> EmittedEvent:
        """Queue an event to be sent again under its first delivery's id."""
        installation = payload.get("installation")
        emitted = EmittedEvent(
            event=event, payload=payload, at=self.now(), delivery_id=guid, redelivery=True,
            installation_id=installation.get("id") if isinstance(installation, dict) else None)
        self.events.append(emitted)
        return emitted

    # -- accounts and the App ----------------------------------------------------------
    def add_user(self, login: str, *, id: int | None = None, type: str = "User",
                 association: str = "NONE") -> User:
        if login in self.users:
            raise ValueError(f"user {login!r} already exists")
        user = User(login=login, id=id if id is not None else self.next_id(), type=type,
                    association=association)
        self.users[login] = user
        return user

    def user(self, login: str) -> User:
        """The user ``login``, created as a plain ``User`` on first mention."""
        return self.users.get(login) or self.add_user(login)

    def add_app(self, *, id: int, slug: str, public_key_pem: str | bytes | None,
                name: str | None = None, owner: str = "octo-org",
                client_id: str | None = None, client_secret: str | None = None,
                webhook_secret: str | None = None, permissions: dict[str, str] | None = None,
                events: list[str] | None = None, description: str = "") -> App:
        if id in self.apps:
            raise ValueError(f"app {id} already exists")
        if isinstance(public_key_pem, str):
            public_key_pem = public_key_pem.encode()
        now = self.now()
        bot = self.add_user(f"{slug}[bot]", type="Bot")
        owner_user = self.users.get(owner) or self.add_user(owner, type="Organization")
        app = App(
            id=id, slug=slug, name=name or slug, owner=owner_user, bot=bot,
            public_key_pem=public_key_pem,
            client_id=client_id or f"Iv23li{secrets.token_hex(7)}",
            client_secret=client_secret, webhook_secret=webhook_secret,
            permissions=dict(permissions or DEFAULT_APP_PERMISSIONS),
            events=list(events if events is not None else DEFAULT_APP_EVENTS),
            description=description, created_at=now, updated_at=now,
        )
        self.apps[id] = app
        return app

    @property
    def app(self) -> App:
        """The first App added (most worlds have exactly one)."""
        if not self.apps:
            raise LookupError("the world has no App; call add_app() or seed one")
        return next(iter(self.apps.values()))

    # -- repositories and installations -----------------------------------------------
    def add_repository(self, full_name: str, *, id: int | None = None, private: bool = True,
                       default_branch: str = "main", git_dir: Path | None = None,
                       owner_type: str = "Organization") -> Repository:
        owner_login, _, name = full_name.partition("/")
        if not owner_login or not name or "/" in name:
            raise ValueError(f"repository must be 'owner/name', got {full_name!r}")
        if self.find_repo(owner_login, name) is not None:
            raise ValueError(f"repository {full_name!r} already exists")
        owner = self.users.get(owner_login) or self.add_user(owner_login, type=owner_type)
        now = self.now()
        repo = Repository(id=id if id is not None else self.next_id(), owner=owner, name=name,
                          private=private, default_branch=default_branch, created_at=now,
                          updated_at=now, pushed_at=now, git_dir=git_dir)
        self.repos[repo.id] = repo
        self._by_name[full_name.lower()] = repo
        return repo

    def put_file(self, repo: str, path: str, content: str | bytes | None) -> None:
        """Set (``None``: delete) a file on ``repo``'s default branch, as the contents API
        serves it; a repository backed by git gets a commit on that branch instead."""
        target = self.repo(repo)
        data = content.encode() if isinstance(content, str) else content
        if target.git_dir is None:
            if data is None:
                target.files.pop(path, None)
            else:
                target.files[path] = data
            return

        git = GitRepo(target.git_dir)
        branch = f"refs/heads/{target.default_branch}"
        try:
            parent: str | None = git.ref(branch)
        except RuntimeError:
            parent = None
        git.commit({path: data}, parent=parent, branch=target.default_branch,
                   message=f"update {path}")

    def find_repo(self, owner: str, name: str) -> Repository | None:
        # An index by name: an organisation of ten thousand repositories is looked up on
        # every request.
        return self._by_name.get(f"{owner}/{name}".lower())

    def repo(self, full_name: str) -> Repository:
        owner, _, name = full_name.partition("/")
        repo = self.find_repo(owner, name)
        if repo is None:
            raise KeyError(f"no repository {full_name!r}")
        return repo

    def add_installation(self, *, account: str, repositories: list[str] | None = None,
                         id: int | None = None, app_id: int | None = None,
                         permissions: dict[str, str] | None = None,
                         events: list[str] | None = None) -> Installation:
        """Install the App on ``account``; ``repositories=None`` means all its repositories."""
        app = self.apps[app_id] if app_id is not None else self.app
        owner = self.users.get(account) or self.add_user(account, type="Organization")
        now = self.now()
        inst = Installation(
            id=id if id is not None else self.next_id(), app_id=app.id, account=owner,
            repository_selection="all" if repositories is None else "selected",
            repository_ids={self.repo(name).id for name in repositories or []},
            permissions=dict(permissions or app.permissions),
            events=list(events if events is not None else app.events),
            created_at=now, updated_at=now,
        )
        self.installations[inst.id] = inst
        return inst

    def installation_repos(self, inst: Installation) -> list[Repository]:
        if inst.repository_selection == "all":
            return [r for r in self.repos.values() if r.owner.login == inst.account.login]
        return [self.repos[i] for i in sorted(inst.repository_ids) if i in self.repos]

    def installation_has(self, inst: Installation, repo: Repository) -> bool:
        """Whether ``inst`` can see ``repo`` (what ``installation_repos`` lists, in O(1))."""
        if inst.repository_selection == "all":
            return repo.owner.login == inst.account.login
        return repo.id in inst.repository_ids

    def installation_for(self, repo: Repository, app_id: int | None = None) -> Installation | None:
        for inst in self.installations.values():
            if (app_id is None or inst.app_id == app_id) and self.installation_has(inst, repo):
                return inst
        return None

    # -- issues and pull requests --------------------------------------------------------
    def _next_number(self, repo: Repository) -> int:
        return 1 + max((i.number for i in self.issues_of.get(repo.id, ())), default=0)

    def add_issue(self, repo: str, *, title: str, user: str, body: str | None = "",
                  number: int | None = None, state: str = "open",
                  created_at: datetime | None = None) -> Issue:
        target = self.repo(repo)
        number = number if number is not None else self._next_number(target)
        if (target.id, number) in self.issues:
            raise ValueError(f"{repo}#{number} already exists")
        when = created_at or self.now()
        issue = Issue(id=self.next_id(), repo_id=target.id, number=number, title=title,
                      body=body, user=self.user(user), state=state, created_at=when,
                      updated_at=when, closed_at=when if state == "closed" else None)
        self.issues[(target.id, number)] = issue
        self.issues_of.setdefault(target.id, []).append(issue)
        return issue

    def add_pull(self, repo: str, *, title: str, user: str, head_sha: str, base_sha: str,
                 diff: str | None = None, number: int | None = None, body: str | None = "",
                 head_ref: str = "feature", base_ref: str = "main", draft: bool = False,
                 state: str = "open", merged: bool = False, commits: int | None = None,
                 created_at: datetime | None = None, updated_at: datetime | None = None,
                 emit: bool = False) -> PullRequest:
        """A pull request; ``diff=None`` computes it from the repository's ``git_dir``."""
        target = self.repo(repo)
        issue = self.add_issue(repo, title=title, user=user, body=body, number=number,
                               state="closed" if merged else state, created_at=created_at)
        issue.is_pull = True
        if updated_at is not None:
            issue.updated_at = updated_at
        revision = self._revision(target, head_sha, base_sha, diff, commits)
        pr = PullRequest(id=self.next_id(), issue=issue, head_ref=head_ref, base_ref=base_ref,
                         draft=draft, revisions=[revision],
                         merged_at=issue.closed_at if merged else None,
                         merged_by=self.user(user) if merged else None)
        self.pulls[(target.id, issue.number)] = pr
        self._track_pull_ref(target, pr.number, head_sha, computed=diff is None)
        if emit:
            self.emit("pull_request", self.payloads.pull_request("opened", pr))
        return pr

    def _revision(self, repo: Repository, head_sha: str, base_sha: str, diff: str | None,
                  commits: int | None) -> Revision:
        if diff is None:
            if repo.git_dir is None:
                raise ValueError(f"{repo.full_name}: give a diff or attach a git_dir")
            diff = diff_between(repo.git_dir, base_sha, head_sha)
            commits = commits or commit_count(repo.git_dir, base_sha, head_sha)
        return Revision(head_sha=head_sha, base_sha=base_sha, diff=diff, files=parse_diff(diff),
                        pushed_at=self.now(), commits=commits or 1)

    @staticmethod
    def _track_pull_ref(repo: Repository, number: int, head_sha: str, *, computed: bool) -> None:
        """Keep GitHub's ``refs/pull/<n>/head`` in a git-backed repository current."""
        if computed and repo.git_dir is not None:
            set_pull_ref(repo.git_dir, number, head_sha)

    def issue(self, repo: str, number: int) -> Issue:
        return self.issues[(self.repo(repo).id, number)]

    def pull(self, repo: str, number: int) -> PullRequest:
        return self.pulls[(self.repo(repo).id, number)]

    def touch(self, issue: Issue) -> None:
        issue.updated_at = self.now()

    def add_issue_comment(self, repo: str, number: int, *, user: str | User, body: str,
                          created_at: datetime | None = None, app_id: int | None = None,
                          emit: bool = False) -> IssueComment:
        issue = self.issue(repo, number)
        author = user if isinstance(user, User) else self.user(user)
        when = created_at or self.now()
        comment = IssueComment(id=self.next_id(), repo_id=issue.repo_id, issue_number=number,
                               user=author, body=body, created_at=when, updated_at=when,
                               app_id=app_id)
        self.issue_comments[comment.id] = comment
        issue.updated_at = max(issue.updated_at, when)
        if emit:
            self.emit("issue_comment", self.payloads.issue_comment("created", comment))
        return comment

    def add_review(self, repo: str, number: int, *, user: str | User, body: str = "",
                   state: str = "COMMENTED", commit_id: str | None = None,
                   app_id: int | None = None) -> Review:
        pr = self.pull(repo, number)
        author = user if isinstance(user, User) else self.user(user)
        review = Review(id=self.next_id(), repo_id=pr.issue.repo_id, pull_number=number,
                        user=author, body=body, state=state,
                        commit_id=commit_id or pr.head.head_sha,
                        submitted_at=None if state == "PENDING" else self.now(), app_id=app_id)
        self.reviews[review.id] = review
        return review

    def add_review_comment(self, repo: str, number: int, *, user: str | User, body: str,
                           path: str, line: int, side: str = "RIGHT",
                           start_line: int | None = None, commit_id: str | None = None,
                           review: Review | None = None, created_at: datetime | None = None,
                           emit: bool = False) -> ReviewComment:
        """A diff comment; it must anchor inside a hunk of ``commit_id``'s diff."""
        pr = self.pull(repo, number)
        revision = pr.revision(commit_id) if commit_id else pr.head
        if revision is None:
            raise ValueError(f"{commit_id} is not a head of {repo}#{number}")
        diff = next((f for f in revision.files if f.path == path), None)
        hunk = diff.hunk_at("LEFT" if side == "LEFT" else "RIGHT", line) if diff else None
        if diff is None or hunk is None:
            raise ValueError(f"{path}:{line} ({side}) is not inside a hunk")
        review = review or self.add_review(repo, number, user=user, commit_id=revision.head_sha)
        when = created_at or self.now()
        comment = ReviewComment(
            id=self.next_id(), repo_id=pr.issue.repo_id, pull_number=number,
            review_id=review.id, user=review.user, body=body, path=path, line=line,
            side=side, start_line=start_line, start_side=side if start_line else None,
            commit_id=revision.head_sha, original_commit_id=revision.head_sha,
            diff_hunk=hunk.text_through("LEFT" if side == "LEFT" else "RIGHT", line),
            position=diff.position_of("LEFT" if side == "LEFT" else "RIGHT", line),
            created_at=when, updated_at=when, app_id=review.app_id)
        self.review_comments[comment.id] = comment
        pr.issue.updated_at = max(pr.issue.updated_at, when)
        if emit:
            self.emit("pull_request_review_comment",
                      self.payloads.pull_request_review_comment("created", comment))
        return comment

    def reply_to_review_comment(self, repo: str, number: int, comment_id: int, *,
                                user: str | User, body: str, app_id: int | None = None,
                                emit: bool = False) -> ReviewComment:
        """A reply in the thread of review comment ``comment_id`` (GitHub points every
        reply at the thread's root)."""
        pr = self.pull(repo, number)
        parent = self.review_comments[comment_id]
        root = parent if parent.in_reply_to_id is None else \
            self.review_comments[parent.in_reply_to_id]
        author = user if isinstance(user, User) else self.user(user)
        review = self.add_review(repo, number, user=author, commit_id=root.commit_id,
                                 app_id=app_id)
        when = self.now()
        comment = ReviewComment(
            id=self.next_id(), repo_id=pr.issue.repo_id, pull_number=number,
            review_id=review.id, user=author, body=body, path=root.path, line=root.line,
            side=root.side, start_line=root.start_line, start_side=root.start_side,
            commit_id=root.commit_id, original_commit_id=root.original_commit_id,
            diff_hunk=root.diff_hunk, position=root.position, created_at=when,
            updated_at=when, in_reply_to_id=root.id, app_id=app_id)
        self.review_comments[comment.id] = comment
        pr.issue.updated_at = max(pr.issue.updated_at, when)
        if emit:
            self.emit("pull_request_review_comment",
                      self.payloads.pull_request_review_comment("created", comment))
        return comment

    def resolve_thread(self, comment_id: int, *, user: str | User) -> None:
        """A person resolves the review thread that ``comment_id`` starts."""
        self.thread_resolutions[comment_id] = user if isinstance(user, User) else self.user(user)

    def association(self, pr: PullRequest, user: User) -> str:
        """``user``'s author association on ``pr``'s repository, as GitHub reports it."""
        return "OWNER" if user.login == self.repos[pr.issue.repo_id].owner.login \
            else user.association

    # -- tokens --------------------------------------------------------------------------
    def mint_token(self, inst: Installation, *, permissions: dict[str, str] | None = None,
                   repository_ids: set[int] | None = None,
                   stateless: bool | None = None) -> Token:
        now = self.now()
        expires = now + timedelta(seconds=self.settings.token_lifetime_seconds)
        use_stateless = self.settings.stateless_tokens if stateless is None else stateless
        token = Token(
            value=make_token_value(inst.app_id, inst.id, expires, stateless=use_stateless),
            app_id=inst.app_id, installation_id=inst.id, created_at=now, expires_at=expires,
            permissions=dict(permissions or inst.permissions), repository_ids=repository_ids)
        self.tokens[token.value] = token
        return token
