"""Builders for GitHub webhook payloads and REST objects in GitHub's exact shapes.

Field sets follow octokit/webhooks' payload examples (api.github.com/pull_request,
issue_comment, pull_request_review_comment) and the REST list endpoints: the same comment
object appears in a webhook and in ``GET /issues/comments`` / ``GET /pulls/comments``;
a REST pull request from ``GET /pulls`` lacks the webhook's ``merged`` and counters.
"""

from __future__ import annotations

from typing import Any

API = "https://api.github.com"
WEB = "https://github.com"
HEAD_SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
BASE_SHA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
APP_ID = 424242
APP_SLUG = "review-agent"

Json = dict[str, Any]


def user(login: str = "Codertocat", user_id: int = 21031067, kind: str = "User") -> Json:
    return {
        "login": login,
        "id": user_id,
        "node_id": "MDQ6VXNlcjIxMDMxMDY3",
        "avatar_url": f"https://avatars.githubusercontent.com/u/{user_id}?v=4",
        "gravatar_id": "",
        "url": f"{API}/users/{login}",
        "html_url": f"{WEB}/{login}",
        "type": kind,
        "site_admin": False,
    }


def bot_user(slug: str = "dependabot", user_id: int = 49699333) -> Json:
    return user(f"{slug}[bot]", user_id, "Bot")


def app(app_id: int = APP_ID, slug: str = APP_SLUG) -> Json:
    return {
        "id": app_id,
        "slug": slug,
        "node_id": "MDM6QXBwNTY=",
        "owner": user("Octocoders", 38302899, "Organization"),
        "name": slug.replace("-", " ").title(),
        "description": "",
        "external_url": "https://example.com",
        "html_url": f"{WEB}/apps/{slug}",
        "created_at": "2019-05-15T15:19:25Z",
        "updated_at": "2019-05-15T15:19:25Z",
        "permissions": {"issues": "write", "pull_requests": "write"},
        "events": ["issue_comment", "pull_request", "pull_request_review_comment"],
    }


def installation(installation_id: int = 2311213) -> Json:
    return {"id": installation_id, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMjMxMTIxMw=="}


def repository(full_name: str = "Codertocat/Hello-World") -> Json:
    owner, name = full_name.split("/")
    return {
        "id": 186853002,
        "node_id": "MDEwOlJlcG9zaXRvcnkxODY4NTMwMDI=",
        "name": name,
        "full_name": full_name,
        "private": False,
        "owner": user(owner),
        "html_url": f"{WEB}/{full_name}",
        "url": f"{API}/repos/{full_name}",
        "default_branch": "main",
    }


def _reactions(url: str) -> Json:
    counts = dict.fromkeys(
        ("+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"), 0
    )
    return {"url": f"{url}/reactions", "total_count": 0, **counts}


def pull_request(
    number: int = 2,
    *,
    repo: str = "Codertocat/Hello-World",
    author: Json | None = None,
    head_sha: str = HEAD_SHA,
    draft: bool = False,
    state: str = "open",
    merged: bool = False,
    rest: bool = False,
) -> Json:
    """A pull request object; ``rest=True`` gives the ``GET /pulls`` list shape."""
    author = author or user()
    url = f"{API}/repos/{repo}/pulls/{number}"
    closed_at = "2019-05-15T15:21:00Z" if state == "closed" else None
    obj: Json = {
        "url": url,
        "id": 279147437,
        "node_id": "MDExOlB1bGxSZXF1ZXN0Mjc5MTQ3NDM3",
        "html_url": f"{WEB}/{repo}/pull/{number}",
        "diff_url": f"{WEB}/{repo}/pull/{number}.diff",
        "patch_url": f"{WEB}/{repo}/pull/{number}.patch",
        "issue_url": f"{API}/repos/{repo}/issues/{number}",
        "number": number,
        "state": state,
        "locked": False,
        "title": "Update the README with new information.",
        "user": author,
        "body": "This is a pretty simple change that we need to pull into master.",
        "created_at": "2019-05-15T15:20:33Z",
        "updated_at": "2019-05-15T15:20:33Z",
        "closed_at": closed_at,
        "merged_at": closed_at if merged else None,
        "merge_commit_sha": None,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [],
        "requested_teams": [],
        "labels": [],
        "milestone": None,
        "draft": draft,
        "head": {
            "label": f"{author['login']}:changes",
            "ref": "changes",
            "sha": head_sha,
            "user": author,
            "repo": repository(repo),
        },
        "base": {
            "label": f"{repo.partition('/')[0]}:main",
            "ref": "main",
            "sha": BASE_SHA,
            "user": user(repo.partition("/")[0]),
            "repo": repository(repo),
        },
        "author_association": "OWNER",
        "auto_merge": None,
        "active_lock_reason": None,
    }
    if not rest:
        obj.update({
            "merged": merged,
            "mergeable": None,
            "rebaseable": None,
            "mergeable_state": "unknown",
            "merged_by": None,
            "comments": 0,
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": 1,
            "additions": 1,
            "deletions": 1,
            "changed_files": 1,
        })
    return obj


def pull_request_event(
    action: str,
    pr: Json | None = None,
    *,
    repo: str = "Codertocat/Hello-World",
    sender: Json | None = None,
    installation_id: int = 2311213,
) -> Json:
    pr = pr or pull_request(repo=repo)
    payload: Json = {
        "action": action,
        "number": pr["number"],
        "pull_request": pr,
        "repository": repository(repo),
        "sender": sender or pr["user"],
        "installation": installation(installation_id),
    }
    if action == "synchronize":
        payload["before"] = BASE_SHA
        payload["after"] = pr["head"]["sha"]
    return payload


def issue(number: int = 2, *, repo: str = "Codertocat/Hello-World", on_pull: bool = True) -> Json:
    """The ``issue`` of an ``issue_comment`` event; ``pull_request`` only on a pull request."""
    kind = "pull" if on_pull else "issues"
    obj: Json = {
        "url": f"{API}/repos/{repo}/issues/{number}",
        "repository_url": f"{API}/repos/{repo}",
        "html_url": f"{WEB}/{repo}/{kind}/{number}",
        "id": 444500041,
        "node_id": "MDU6SXNzdWU0NDQ1MDAwNDE=",
        "number": number,
        "title": "Spelling error in the README file",
        "user": user(),
        "labels": [],
        "state": "open",
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": 1,
        "created_at": "2019-05-15T15:20:18Z",
        "updated_at": "2019-05-15T15:20:21Z",
        "closed_at": None,
        "author_association": "OWNER",
        "active_lock_reason": None,
        "body": "",
        "performed_via_github_app": None,
    }
    if on_pull:
        obj["pull_request"] = {
            "url": f"{API}/repos/{repo}/pulls/{number}",
            "html_url": f"{WEB}/{repo}/pull/{number}",
            "diff_url": f"{WEB}/{repo}/pull/{number}.diff",
            "patch_url": f"{WEB}/{repo}/pull/{number}.patch",
            "merged_at": None,
        }
    return obj


def issue_comment(
    body: str,
    *,
    comment_id: int = 492700400,
    number: int = 2,
    repo: str = "Codertocat/Hello-World",
    author: Json | None = None,
    association: str = "OWNER",
    on_pull: bool = True,
    via_app: Json | None = None,
) -> Json:
    """A conversation comment: the webhook's ``comment`` and a ``GET /issues/comments`` item."""
    kind = "pull" if on_pull else "issues"
    url = f"{API}/repos/{repo}/issues/comments/{comment_id}"
    return {
        "url": url,
        "html_url": f"{WEB}/{repo}/{kind}/{number}#issuecomment-{comment_id}",
        "issue_url": f"{API}/repos/{repo}/issues/{number}",
        "id": comment_id,
        "node_id": "MDEyOklzc3VlQ29tbWVudDQ5MjcwMDQwMA==",
        "user": author or user(),
        "created_at": "2019-05-15T15:20:21Z",
        "updated_at": "2019-05-15T15:20:21Z",
        "author_association": association,
        "body": body,
        "reactions": _reactions(url),
        "performed_via_github_app": via_app,
    }


def issue_comment_event(
    action: str,
    comment: Json,
    *,
    number: int = 2,
    repo: str = "Codertocat/Hello-World",
    on_pull: bool = True,
    sender: Json | None = None,
    old_body: str | None = None,
) -> Json:
    payload: Json = {
        "action": action,
        "issue": issue(number, repo=repo, on_pull=on_pull),
        "comment": comment,
        "repository": repository(repo),
        "sender": sender or comment["user"],
        "installation": installation(),
    }
    if action == "edited":
        payload["changes"] = {"body": {"from": old_body if old_body is not None else ""}}
    return payload


def review_comment(
    body: str,
    *,
    comment_id: int = 284312630,
    number: int = 2,
    repo: str = "Codertocat/Hello-World",
    author: Json | None = None,
    association: str = "OWNER",
    via_app: Json | None = None,
) -> Json:
    """A diff comment: the webhook's ``comment`` and a ``GET /pulls/comments`` item."""
    url = f"{API}/repos/{repo}/pulls/comments/{comment_id}"
    obj: Json = {
        "url": url,
        "pull_request_review_id": 237895671,
        "id": comment_id,
        "node_id": "MDI0OlB1bGxSZXF1ZXN0UmV2aWV3Q29tbWVudDI4NDMxMjYzMA==",
        "diff_hunk": "@@ -1 +1 @@\n-# Hello-World",
        "path": "README.md",
        "position": 1,
        "original_position": 1,
        "commit_id": HEAD_SHA,
        "original_commit_id": HEAD_SHA,
        "user": author or user(),
        "body": body,
        "created_at": "2019-05-15T15:20:37Z",
        "updated_at": "2019-05-15T15:20:38Z",
        "html_url": f"{WEB}/{repo}/pull/{number}#discussion_r{comment_id}",
        "pull_request_url": f"{API}/repos/{repo}/pulls/{number}",
        "author_association": association,
        "_links": {
            "self": {"href": url},
            "html": {"href": f"{WEB}/{repo}/pull/{number}#discussion_r{comment_id}"},
            "pull_request": {"href": f"{API}/repos/{repo}/pulls/{number}"},
        },
        "start_line": None,
        "original_start_line": None,
        "start_side": None,
        "line": 1,
        "original_line": 1,
        "side": "RIGHT",
        "reactions": _reactions(url),
    }
    if via_app is not None:
        obj["performed_via_github_app"] = via_app
    return obj


def review_comment_event(
    action: str,
    comment: Json,
    *,
    number: int = 2,
    repo: str = "Codertocat/Hello-World",
    sender: Json | None = None,
    old_body: str | None = None,
) -> Json:
    pr = pull_request(number, repo=repo)
    # The review-comment event's pull_request omits the merge/counter fields.
    for key in ("merged", "mergeable", "rebaseable", "mergeable_state", "merged_by",
                "comments", "review_comments", "maintainer_can_modify", "commits",
                "additions", "deletions", "changed_files", "draft"):
        pr.pop(key, None)
    payload: Json = {
        "action": action,
        "comment": comment,
        "pull_request": pr,
        "repository": repository(repo),
        "sender": sender or comment["user"],
        "installation": installation(),
    }
    if action == "edited":
        payload["changes"] = {"body": {"from": old_body if old_body is not None else ""}}
    return payload
