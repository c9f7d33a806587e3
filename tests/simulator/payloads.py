"""GitHub's JSON shapes for the simulated objects, shared by the REST API and webhooks.

One renderer serves both so that a comment fetched over REST and the same comment in an
``issue_comment`` webhook are the same object, as on GitHub. ``api`` is the REST base URL
(``https://api.github.com``, or the simulator's own address) and ``web`` the HTML base.
"""

from __future__ import annotations

import base64
from collections import Counter
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from .clock import iso
from .diffs import FileDiff
from .models import (
    REACTION_CONTENTS,
    App,
    CheckRun,
    Installation,
    Issue,
    IssueComment,
    PullRequest,
    Reaction,
    Repository,
    Review,
    ReviewComment,
    User,
)

if TYPE_CHECKING:
    from .state import World

Json = dict[str, Any]


def node_id(kind: str, number: int) -> str:
    """A GraphQL-style global id: the new format's type prefix and an opaque tail."""
    tail = base64.urlsafe_b64encode(number.to_bytes(8, "big")).decode().rstrip("=")
    return f"{kind}_{tail}"


class Renderer:
    def __init__(self, world: World, *, api: str, web: str) -> None:
        self.world = world
        self.api = api.rstrip("/")
        self.web = web.rstrip("/")

    # -- accounts ---------------------------------------------------------------------
    def user(self, user: User) -> Json:
        if user.type == "Bot":
            html = f"{self.web}/apps/{user.login.removesuffix('[bot]')}"
        else:
            html = f"{self.web}/{user.login}"
        # GitHub escapes the brackets of a bot's login in its URLs (but not in html_url).
        url = f"{self.api}/users/{quote(user.login, safe='')}"
        return {
            "login": user.login,
            "id": user.id,
            "node_id": node_id("BOT" if user.type == "Bot" else "U", user.id),
            "avatar_url": f"https://avatars.githubusercontent.com/u/{user.id}?v=4",
            "gravatar_id": "",
            "url": url,
            "html_url": html,
            "followers_url": f"{url}/followers",
            "following_url": f"{url}/following{{/other_user}}",
            "gists_url": f"{url}/gists{{/gist_id}}",
            "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
            "subscriptions_url": f"{url}/subscriptions",
            "organizations_url": f"{url}/orgs",
            "repos_url": f"{url}/repos",
            "events_url": f"{url}/events{{/privacy}}",
            "received_events_url": f"{url}/received_events",
            "type": user.type,
            "user_view_type": "public",
            "site_admin": user.site_admin,
        }

    def app(self, app: App) -> Json:
        return {
            "id": app.id,
            "slug": app.slug,
            "node_id": node_id("A", app.id),
            "client_id": app.client_id,
            "owner": self.user(app.owner),
            "name": app.name,
            "description": app.description,
            "external_url": f"{self.web}/apps/{app.slug}",
            "html_url": f"{self.web}/apps/{app.slug}",
            "created_at": iso(app.created_at),
            "updated_at": iso(app.updated_at),
            "permissions": dict(app.permissions),
            "events": list(app.events),
        }

    def installation(self, inst: Installation, *, epoch_times: bool = False) -> Json:
        def when(value: Any) -> Any:
            return int(value.timestamp()) if epoch_times else iso(value)

        app = self.world.apps[inst.app_id]
        return {
            "id": inst.id,
            "account": self.user(inst.account),
            "repository_selection": inst.repository_selection,
            "access_tokens_url": f"{self.api}/app/installations/{inst.id}/access_tokens",
            "repositories_url": f"{self.api}/installation/repositories",
            "html_url": f"{self.web}/organizations/{inst.account.login}/settings/installations/"
            f"{inst.id}",
            "app_id": inst.app_id,
            "app_slug": app.slug,
            "client_id": app.client_id,
            "target_id": inst.account.id,
            "target_type": inst.account.type,
            "permissions": dict(inst.permissions),
            "events": list(inst.events),
            "created_at": when(inst.created_at),
            "updated_at": when(inst.updated_at),
            "single_file_name": None,
            "has_multiple_single_files": False,
            "single_file_paths": [],
            "suspended_by": None,
            "suspended_at": when(inst.suspended_at) if inst.suspended_at else None,
        }

    # -- repositories -----------------------------------------------------------------
    def repo_min(self, repo: Repository) -> Json:
        return {"id": repo.id, "node_id": node_id("R", repo.id), "name": repo.name,
                "full_name": repo.full_name, "private": repo.private}

    def repo(self, repo: Repository) -> Json:
        url = f"{self.api}/repos/{repo.full_name}"
        html = f"{self.web}/{repo.full_name}"
        clone = repo.git_dir.resolve().as_uri() if repo.git_dir else f"{html}.git"
        host = self.web.split("://", 1)[-1]
        open_issues = sum(1 for i in self.world.issues_of.get(repo.id, ()) if i.state == "open")
        return {
            **self.repo_min(repo),
            "owner": self.user(repo.owner),
            "html_url": html,
            "description": None,
            "fork": False,
            "url": url,
            "forks_url": f"{url}/forks",
            "keys_url": f"{url}/keys{{/key_id}}",
            "collaborators_url": f"{url}/collaborators{{/collaborator}}",
            "teams_url": f"{url}/teams",
            "hooks_url": f"{url}/hooks",
            "issue_events_url": f"{url}/issues/events{{/number}}",
            "events_url": f"{url}/events",
            "assignees_url": f"{url}/assignees{{/user}}",
            "branches_url": f"{url}/branches{{/branch}}",
            "tags_url": f"{url}/tags",
            "blobs_url": f"{url}/git/blobs{{/sha}}",
            "git_tags_url": f"{url}/git/tags{{/sha}}",
            "git_refs_url": f"{url}/git/refs{{/sha}}",
            "trees_url": f"{url}/git/trees{{/sha}}",
            "statuses_url": f"{url}/statuses/{{sha}}",
            "languages_url": f"{url}/languages",
            "stargazers_url": f"{url}/stargazers",
            "contributors_url": f"{url}/contributors",
            "subscribers_url": f"{url}/subscribers",
            "subscription_url": f"{url}/subscription",
            "commits_url": f"{url}/commits{{/sha}}",
            "git_commits_url": f"{url}/git/commits{{/sha}}",
            "comments_url": f"{url}/comments{{/number}}",
            "issue_comment_url": f"{url}/issues/comments{{/number}}",
            "contents_url": f"{url}/contents/{{+path}}",
            "compare_url": f"{url}/compare/{{base}}...{{head}}",
            "merges_url": f"{url}/merges",
            "archive_url": f"{url}/{{archive_format}}{{/ref}}",
            "downloads_url": f"{url}/downloads",
            "issues_url": f"{url}/issues{{/number}}",
            "pulls_url": f"{url}/pulls{{/number}}",
            "milestones_url": f"{url}/milestones{{/number}}",
            "notifications_url": f"{url}/notifications{{?since,all,participating}}",
            "labels_url": f"{url}/labels{{/name}}",
            "releases_url": f"{url}/releases{{/id}}",
            "deployments_url": f"{url}/deployments",
            "created_at": iso(repo.created_at),
            "updated_at": iso(repo.updated_at),
            "pushed_at": iso(repo.pushed_at),
            "git_url": f"git://{host}/{repo.full_name}.git",
            "ssh_url": f"git@{host}:{repo.full_name}.git",
            "clone_url": clone,
            "svn_url": html,
            "homepage": None,
            "size": 108,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": "Python",
            "has_issues": True,
            "has_projects": True,
            "has_downloads": True,
            "has_wiki": True,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "allow_forking": True,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "private" if repo.private else "public",
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
        }

    # -- issues and pull requests ------------------------------------------------------
    def reactions(self, reactions: list[Reaction], url: str) -> Json:
        counts = Counter(r.content for r in reactions)
        rollup: Json = {"url": url, "total_count": len(reactions)}
        rollup.update({content: counts.get(content, 0) for content in REACTION_CONTENTS})
        return rollup

    def _association(self, repo: Repository, user: User) -> str:
        return "OWNER" if user.login == repo.owner.login else user.association

    def issue(self, issue: Issue) -> Json:
        repo = self.world.repos[issue.repo_id]
        url = f"{self.api}/repos/{repo.full_name}/issues/{issue.number}"
        kind = "pull" if issue.is_pull else "issues"
        out: Json = {
            "url": url,
            "repository_url": f"{self.api}/repos/{repo.full_name}",
            "comments_url": f"{url}/comments",
            "html_url": f"{self.web}/{repo.full_name}/{kind}/{issue.number}",
            "id": issue.id,
            "node_id": node_id("I", issue.id),
            "number": issue.number,
            "title": issue.title,
            "user": self.user(issue.user),
            "labels": [],
            "state": issue.state,
            "locked": issue.locked,
            "assignee": None,
            "assignees": [],
            "comments": sum(
                1 for c in self.world.issue_comments.values()
                if c.repo_id == repo.id and c.issue_number == issue.number
            ),
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": iso(issue.closed_at) if issue.closed_at else None,
            "author_association": self._association(repo, issue.user),
            "active_lock_reason": None,
            "body": issue.body,
            "reactions": self.reactions(issue.reactions, f"{url}/reactions"),
            "performed_via_github_app": None,
        }
        if issue.is_pull:
            pr = self.world.pulls[(repo.id, issue.number)]
            pulls = f"{self.api}/repos/{repo.full_name}/pulls/{issue.number}"
            html = f"{self.web}/{repo.full_name}/pull/{issue.number}"
            out["draft"] = pr.draft
            out["pull_request"] = {
                "url": pulls, "html_url": html, "diff_url": f"{html}.diff",
                "patch_url": f"{html}.patch",
                "merged_at": iso(pr.merged_at) if pr.merged_at else None,
            }
        return out

    def _branch(self, repo: Repository, ref: str, sha: str) -> Json:
        return {"label": f"{repo.owner.login}:{ref}", "ref": ref, "sha": sha,
                "user": self.user(repo.owner), "repo": self.repo(repo)}

    def pull(self, pr: PullRequest, *, full: bool = True) -> Json:
        """``full`` is the single-PR shape; lists return the shorter "simple" shape."""
        repo = self.world.repos[pr.issue.repo_id]
        head_repo = self.world.repos.get(pr.head_repo_id or repo.id, repo)
        url = f"{self.api}/repos/{repo.full_name}/pulls/{pr.number}"
        html = f"{self.web}/{repo.full_name}/pull/{pr.number}"
        issue = pr.issue
        issue_url = f"{self.api}/repos/{repo.full_name}/issues/{pr.number}"
        statuses = f"{self.api}/repos/{repo.full_name}/statuses/{pr.head.head_sha}"
        out: Json = {
            "url": url,
            "id": pr.id,
            "node_id": node_id("PR", pr.id),
            "html_url": html,
            "diff_url": f"{html}.diff",
            "patch_url": f"{html}.patch",
            "issue_url": issue_url,
            "commits_url": f"{url}/commits",
            "review_comments_url": f"{url}/comments",
            "review_comment_url": f"{self.api}/repos/{repo.full_name}/pulls/comments"
                                  "{/number}",
            "comments_url": f"{issue_url}/comments",
            "statuses_url": statuses,
            "number": pr.number,
            "state": issue.state,
            "locked": issue.locked,
            "title": issue.title,
            "user": self.user(issue.user),
            "body": issue.body,
            "labels": [],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": iso(issue.closed_at) if issue.closed_at else None,
            "merged_at": iso(pr.merged_at) if pr.merged_at else None,
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": self._branch(head_repo, pr.head_ref, pr.head.head_sha),
            "base": self._branch(repo, pr.base_ref, pr.head.base_sha),
            "author_association": self._association(repo, issue.user),
            "auto_merge": None,
            "draft": pr.draft,
            "_links": {
                "self": {"href": url}, "html": {"href": html},
                "issue": {"href": issue_url}, "comments": {"href": f"{issue_url}/comments"},
                "review_comments": {"href": f"{url}/comments"},
                "review_comment": {"href": f"{self.api}/repos/{repo.full_name}/pulls/"
                                           "comments{/number}"},
                "commits": {"href": f"{url}/commits"}, "statuses": {"href": statuses},
            },
        }
        if full:
            files = pr.head.files
            out.update({
                "merged": pr.merged_at is not None,
                "mergeable": None if pr.merged_at or issue.state == "closed" else True,
                "rebaseable": None if issue.state == "closed" else True,
                "mergeable_state": "unknown" if issue.state == "closed" else "clean",
                "merged_by": self.user(pr.merged_by) if pr.merged_by else None,
                "comments": self.issue(issue)["comments"],
                "review_comments": sum(
                    1 for c in self.world.review_comments.values()
                    if c.repo_id == repo.id and c.pull_number == pr.number
                ),
                "maintainer_can_modify": pr.maintainer_can_modify,
                "commits": pr.head.commits,
                "additions": sum(f.additions for f in files),
                "deletions": sum(f.deletions for f in files),
                "changed_files": len(files),
            })
        return out

    def file(self, repo: Repository, pr: PullRequest, diff: FileDiff) -> Json:
        sha = pr.head.head_sha
        out: Json = {
            "sha": diff.head_blob,
            "filename": diff.path,
            "status": diff.status,
            "additions": diff.additions,
            "deletions": diff.deletions,
            "changes": diff.additions + diff.deletions,
            "blob_url": f"{self.web}/{repo.full_name}/blob/{sha}/{diff.path}",
            "raw_url": f"{self.web}/{repo.full_name}/raw/{sha}/{diff.path}",
            "contents_url": f"{self.api}/repos/{repo.full_name}/contents/{diff.path}?ref={sha}",
        }
        patch = diff.patch
        if patch is not None and len(patch.encode()) <= self.world.settings.max_patch_bytes:
            out["patch"] = patch
        if diff.old_path is not None:
            out["previous_filename"] = diff.old_path
        return out

    # -- comments and reviews ----------------------------------------------------------
    def issue_comment(self, comment: IssueComment) -> Json:
        repo = self.world.repos[comment.repo_id]
        issue = self.world.issues[(repo.id, comment.issue_number)]
        kind = "pull" if issue.is_pull else "issues"
        url = f"{self.api}/repos/{repo.full_name}/issues/comments/{comment.id}"
        return {
            "url": url,
            "html_url": f"{self.web}/{repo.full_name}/{kind}/{comment.issue_number}"
            f"#issuecomment-{comment.id}",
            "issue_url": f"{self.api}/repos/{repo.full_name}/issues/{comment.issue_number}",
            "id": comment.id,
            "node_id": node_id("IC", comment.id),
            "user": self.user(comment.user),
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
            "author_association": self._association(repo, comment.user),
            "body": comment.body,
            "reactions": self.reactions(comment.reactions, f"{url}/reactions"),
            "performed_via_github_app": (
                self.app(self.world.apps[comment.app_id]) if comment.app_id else None
            ),
        }

    def review_comment(self, comment: ReviewComment) -> Json:
        repo = self.world.repos[comment.repo_id]
        url = f"{self.api}/repos/{repo.full_name}/pulls/comments/{comment.id}"
        html = f"{self.web}/{repo.full_name}/pull/{comment.pull_number}#discussion_r{comment.id}"
        pr_url = f"{self.api}/repos/{repo.full_name}/pulls/{comment.pull_number}"
        out: Json = {
            "url": url,
            "pull_request_review_id": comment.review_id,
            "id": comment.id,
            "node_id": node_id("PRRC", comment.id),
            "diff_hunk": comment.diff_hunk,
            "path": comment.path,
            "position": comment.position,
            "original_position": comment.position,
            "commit_id": comment.commit_id,
            "original_commit_id": comment.original_commit_id,
            "user": self.user(comment.user),
            "body": comment.body,
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
            "html_url": html,
            "pull_request_url": pr_url,
            "author_association": self._association(repo, comment.user),
            "_links": {"self": {"href": url}, "html": {"href": html},
                       "pull_request": {"href": pr_url}},
            "reactions": self.reactions(comment.reactions, f"{url}/reactions"),
            "start_line": comment.start_line,
            "original_start_line": comment.start_line,
            "start_side": comment.start_side,
            "line": comment.line,
            "original_line": comment.line,
            "side": comment.side,
            "subject_type": "line",
        }
        if comment.in_reply_to_id is not None:
            out["in_reply_to_id"] = comment.in_reply_to_id
        return out

    def review(self, review: Review) -> Json:
        repo = self.world.repos[review.repo_id]
        html = f"{self.web}/{repo.full_name}/pull/{review.pull_number}" \
               f"#pullrequestreview-{review.id}"
        pr_url = f"{self.api}/repos/{repo.full_name}/pulls/{review.pull_number}"
        out: Json = {
            "id": review.id,
            "node_id": node_id("PRR", review.id),
            "user": self.user(review.user),
            "body": review.body,
            "state": review.state,
            "html_url": html,
            "pull_request_url": pr_url,
            "author_association": self._association(repo, review.user),
            "_links": {"html": {"href": html}, "pull_request": {"href": pr_url}},
            "commit_id": review.commit_id,
        }
        if review.submitted_at is not None:
            out["submitted_at"] = iso(review.submitted_at)
        return out

    def check_run(self, run: CheckRun) -> Json:
        repo = self.world.repos[run.repo_id]
        url = f"{self.api}/repos/{repo.full_name}/check-runs/{run.id}"
        html = f"{self.web}/{repo.full_name}/runs/{run.id}"
        app = self.world.apps[run.app_id]
        return {
            "id": run.id, "node_id": node_id("CR", run.id), "head_sha": run.head_sha,
            "external_id": run.external_id or "", "url": url, "html_url": html,
            "details_url": run.details_url or html, "status": run.status,
            "conclusion": run.conclusion, "started_at": iso(run.started_at),
            "completed_at": iso(run.completed_at) if run.completed_at else None,
            "output": {"title": run.title, "summary": run.summary, "text": run.text,
                       "annotations_count": 0, "annotations_url": f"{url}/annotations"},
            "name": run.name, "check_suite": {"id": run.check_suite_id},
            "app": self.app(app), "pull_requests": [],
        }

    def reaction(self, reaction: Reaction) -> Json:
        return {"id": reaction.id, "node_id": node_id("REA", reaction.id),
                "user": self.user(reaction.user), "content": reaction.content,
                "created_at": iso(reaction.created_at)}
