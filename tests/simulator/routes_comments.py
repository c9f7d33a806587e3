"""Issue (conversation) comments, review (diff) comments, and reactions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from .clock import parse_iso
from .models import REACTION_CONTENTS, Issue, IssueComment, Reaction, ReviewComment
from .rest import ApiError, not_found
from .routing import Ctx, Reply, RouteTable

routes = RouteTable()

ISSUES_READ, ISSUES_WRITE = ("issues", "read"), ("issues", "write")
PR_READ, PR_WRITE = ("pull_requests", "read"), ("pull_requests", "write")
MAX_BODY = 65536
C = TypeVar("C", IssueComment, ReviewComment)


def _since(ctx: Ctx, resource: str) -> datetime | None:
    raw = ctx.query.get("since")
    if raw is None:
        return None
    try:
        return parse_iso(raw)
    except ValueError as exc:
        raise ApiError(422, "Validation Failed", errors=[
            {"resource": resource, "field": "since", "code": "invalid"}]) from exc


def _ordered(ctx: Ctx, items: list[C], resource: str) -> list[C]:
    """GitHub's list semantics: ascending id by default; ``direction`` only with ``sort``;
    ``since`` keeps what was updated at or after that time."""
    since = _since(ctx, resource)
    if since is not None:
        items = [c for c in items if c.updated_at >= since]
    sort = ctx.query.get("sort")
    if sort is None:
        return sorted(items, key=lambda c: c.id)
    if sort not in ("created", "updated", "created_at"):
        raise ApiError(422, "Validation Failed", errors=[
            {"resource": resource, "field": "sort", "code": "invalid", "value": sort}])
    direction = ctx.query.get("direction", "desc")
    key: Callable[[C], Any] = (
        (lambda c: (c.updated_at, c.id)) if sort == "updated" else (lambda c: (c.created_at, c.id))
    )
    return sorted(items, key=key, reverse=direction == "desc")


def _body(ctx: Ctx) -> str:
    body = ctx.json().get("body")
    if not isinstance(body, str) or not body:
        raise ApiError(422, "Invalid request.\n\n\"body\" wasn't supplied.")
    if len(body) > MAX_BODY:
        raise ApiError(422, "Validation Failed", errors=[
            {"resource": "IssueComment", "code": "custom", "field": "body",
             "message": f"body is too long (maximum is {MAX_BODY} characters)"}])
    return body


def _issue(ctx: Ctx, *permissions: tuple[str, str]) -> Issue:
    repo = ctx.repository(*permissions)
    issue = ctx.world.issues.get((repo.id, ctx.int_param("number")))
    if issue is None:
        raise not_found()
    return issue


def _issue_comment(ctx: Ctx, *permissions: tuple[str, str]) -> IssueComment:
    repo = ctx.repository(*permissions)
    comment = ctx.world.issue_comments.get(ctx.int_param("comment_id"))
    if comment is None or comment.repo_id != repo.id:
        raise not_found()
    return comment


def _published(ctx: Ctx, comment: ReviewComment) -> bool:
    review = ctx.world.reviews.get(comment.review_id)
    return review is None or review.state != "PENDING"


# -- issue comments ------------------------------------------------------------------------
@routes.add("GET", "/repos/{owner}/{repo}/issues/comments", auth="token")
async def list_repo_issue_comments(ctx: Ctx) -> Reply:
    repo = ctx.repository(ISSUES_READ, PR_READ)
    items = [c for c in ctx.world.issue_comments.values() if c.repo_id == repo.id]
    return ctx.page([ctx.render.issue_comment(c)
                     for c in _ordered(ctx, items, "IssueComment")])


@routes.add("GET", "/repos/{owner}/{repo}/issues/{number}/comments", auth="token")
async def list_issue_comments(ctx: Ctx) -> Reply:
    issue = _issue(ctx, ISSUES_READ, PR_READ)
    since = _since(ctx, "IssueComment")
    items = sorted((c for c in ctx.world.issue_comments.values()
                    if c.repo_id == issue.repo_id and c.issue_number == issue.number
                    and (since is None or c.updated_at >= since)), key=lambda c: c.id)
    return ctx.page([ctx.render.issue_comment(c) for c in items])


@routes.add("POST", "/repos/{owner}/{repo}/issues/{number}/comments", auth="token",
            creates_content=True)
async def create_issue_comment(ctx: Ctx) -> Reply:
    issue = _issue(ctx, ISSUES_WRITE, PR_WRITE)
    body = _body(ctx)
    assert ctx.token is not None
    app = ctx.world.apps[ctx.token.app_id]
    repo = ctx.world.repos[issue.repo_id]
    comment = ctx.world.add_issue_comment(repo.full_name, issue.number, user=app.bot,
                                          body=body, app_id=app.id, emit=True)
    return Reply(status=201, body=ctx.render.issue_comment(comment),
                 headers={"location": f"{ctx.base_url}/repos/{repo.full_name}/issues/comments/"
                          f"{comment.id}"})


@routes.add("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}", auth="token")
async def get_issue_comment(ctx: Ctx) -> Reply:
    comment = _issue_comment(ctx, ISSUES_READ, PR_READ)
    return Reply(body=ctx.render.issue_comment(comment), last_modified=comment.updated_at)


@routes.add("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}", auth="token")
async def update_issue_comment(ctx: Ctx) -> Reply:
    comment = _issue_comment(ctx, ISSUES_WRITE, PR_WRITE)
    body = _body(ctx)
    assert ctx.token is not None
    bot = ctx.world.apps[ctx.token.app_id].bot
    ctx.world.edit_issue_comment(comment, body, sender=bot)
    return Reply(body=ctx.render.issue_comment(comment))


@routes.add("DELETE", "/repos/{owner}/{repo}/issues/comments/{comment_id}", auth="token")
async def delete_issue_comment(ctx: Ctx) -> Reply:
    comment = _issue_comment(ctx, ISSUES_WRITE, PR_WRITE)
    assert ctx.token is not None
    ctx.world.delete_issue_comment(comment, sender=ctx.world.apps[ctx.token.app_id].bot)
    return Reply(status=204)


# -- review comments -----------------------------------------------------------------------
@routes.add("GET", "/repos/{owner}/{repo}/pulls/comments", auth="token")
async def list_repo_review_comments(ctx: Ctx) -> Reply:
    repo = ctx.repository(PR_READ)
    items = [c for c in ctx.world.review_comments.values()
             if c.repo_id == repo.id and _published(ctx, c)]
    return ctx.page([ctx.render.review_comment(c)
                     for c in _ordered(ctx, items, "PullRequestReviewComment")])


@routes.add("GET", "/repos/{owner}/{repo}/pulls/{number}/comments", auth="token")
async def list_pull_review_comments(ctx: Ctx) -> Reply:
    repo = ctx.repository(PR_READ)
    number = ctx.int_param("number")
    if (repo.id, number) not in ctx.world.pulls:
        raise not_found()
    items = [c for c in ctx.world.review_comments.values()
             if c.repo_id == repo.id and c.pull_number == number and _published(ctx, c)]
    return ctx.page([ctx.render.review_comment(c)
                     for c in _ordered(ctx, items, "PullRequestReviewComment")])


@routes.add("GET", "/repos/{owner}/{repo}/pulls/comments/{comment_id}", auth="token")
async def get_review_comment(ctx: Ctx) -> Reply:
    repo = ctx.repository(PR_READ)
    comment = ctx.world.review_comments.get(ctx.int_param("comment_id"))
    if comment is None or comment.repo_id != repo.id or not _published(ctx, comment):
        raise not_found()
    return Reply(body=ctx.render.review_comment(comment), last_modified=comment.updated_at)


@routes.add("POST", "/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies",
            auth="token", creates_content=True)
async def reply_to_review_comment(ctx: Ctx) -> Reply:
    """A reply in a review thread. GitHub takes any comment of the thread and points the
    reply at its root; a comment of another pull request is a 404."""
    repo = ctx.repository(PR_WRITE)
    number = ctx.int_param("number")
    parent = ctx.world.review_comments.get(ctx.int_param("comment_id"))
    if ((repo.id, number) not in ctx.world.pulls or parent is None
            or parent.repo_id != repo.id or parent.pull_number != number
            or not _published(ctx, parent)):
        raise not_found()
    body = _body(ctx)
    assert ctx.token is not None
    app = ctx.world.apps[ctx.token.app_id]
    comment = ctx.world.reply_to_review_comment(repo.full_name, number, parent.id,
                                                user=app.bot, body=body, app_id=app.id,
                                                emit=True)
    return Reply(status=201, body=ctx.render.review_comment(comment),
                 headers={"location": f"{ctx.base_url}/repos/{repo.full_name}/pulls/comments/"
                          f"{comment.id}"})


# -- reactions -----------------------------------------------------------------------------
def _react(ctx: Ctx, reactions: list[Reaction]) -> Reply:
    """201 with a new reaction, or 200 with the one this user already left."""
    content = ctx.json().get("content")
    if content not in REACTION_CONTENTS:
        raise ApiError(422, "Validation Failed", errors=[
            {"resource": "Reaction", "code": "custom", "field": "content",
             "message": "content is not included in the list"}])
    assert ctx.token is not None
    bot = ctx.world.apps[ctx.token.app_id].bot
    for existing in reactions:
        if existing.user is bot and existing.content == content:
            return Reply(status=200, body=ctx.render.reaction(existing))
    reaction = Reaction(id=ctx.world.next_id(), user=bot, content=content,
                        created_at=ctx.world.now())
    reactions.append(reaction)
    return Reply(status=201, body=ctx.render.reaction(reaction))


@routes.add("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
            auth="token", creates_content=True)
async def react_issue_comment(ctx: Ctx) -> Reply:
    comment = _issue_comment(ctx)
    issue = ctx.world.issues[(comment.repo_id, comment.issue_number)]
    # Reported in practice: on a PR's conversation comment this needs pull_requests:write
    # (the docs say issues:write, which is what a plain issue's comment needs).
    ctx.repository(PR_WRITE if issue.is_pull else ISSUES_WRITE)
    return _react(ctx, comment.reactions)


@routes.add("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
            auth="token")
async def list_issue_comment_reactions(ctx: Ctx) -> Reply:
    comment = _issue_comment(ctx, ISSUES_READ, PR_READ)
    content = ctx.query.get("content")
    items = [r for r in comment.reactions if content is None or r.content == content]
    return ctx.page([ctx.render.reaction(r) for r in items])


@routes.add("POST", "/repos/{owner}/{repo}/pulls/comments/{comment_id}/reactions",
            auth="token", creates_content=True)
async def react_review_comment(ctx: Ctx) -> Reply:
    repo = ctx.repository(PR_WRITE)
    comment = ctx.world.review_comments.get(ctx.int_param("comment_id"))
    if comment is None or comment.repo_id != repo.id or not _published(ctx, comment):
        raise not_found()
    return _react(ctx, comment.reactions)


@routes.add("POST", "/repos/{owner}/{repo}/issues/{number}/reactions", auth="token",
            creates_content=True)
async def react_issue(ctx: Ctx) -> Reply:
    issue = _issue(ctx, ISSUES_WRITE, PR_WRITE)
    if not issue.is_pull:
        ctx.repository(ISSUES_WRITE)
    return _react(ctx, issue.reactions)
