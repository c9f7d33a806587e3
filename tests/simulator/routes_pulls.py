"""Pull requests: list, get (JSON, .diff, .patch), edit, files, and reviews."""

from __future__ import annotations

from datetime import timedelta

from .diffs import diff_line_count
from .models import PullRequest, Review, ReviewComment
from .rest import ApiError, not_found, unprocessable
from .reviews import ONE_PENDING, REVIEW_DOCS, prepare_comments
from .routing import Ctx, Reply, RouteTable

routes = RouteTable()

PR_READ = ("pull_requests", "read")
PR_WRITE = ("pull_requests", "write")
FILES_DOCS = "https://docs.github.com/rest/pulls/pulls#list-pull-requests-files"
TOO_LARGE_HINT = (
    "Consider using 'List pull requests files' API or locally cloning the repository instead."
)
EVENT_STATES = {None: "PENDING", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED",
                "COMMENT": "COMMENTED"}


def _pull(ctx: Ctx, *permissions: tuple[str, str]) -> PullRequest:
    repo = ctx.repository(*permissions)
    pr = ctx.world.pulls.get((repo.id, ctx.int_param("number")))
    if pr is None:
        raise not_found()
    return pr


def _invalid(field: str, value: object) -> ApiError:
    return ApiError(422, "Validation Failed", errors=[
        {"resource": "PullRequest", "field": field, "code": "invalid", "value": value}])


@routes.add("GET", "/repos/{owner}/{repo}/pulls", auth="token")
async def list_pulls(ctx: Ctx) -> Reply:
    repo = ctx.repository(PR_READ)
    state = ctx.query.get("state", "open")
    sort = ctx.query.get("sort", "created")
    if state not in ("open", "closed", "all"):
        raise _invalid("state", state)
    if sort not in ("created", "updated", "popularity", "long-running"):
        raise _invalid("sort", sort)
    direction = ctx.query.get("direction", "desc" if sort == "created" else "asc")
    if direction not in ("asc", "desc"):
        raise _invalid("direction", direction)
    pulls = [p for (rid, _), p in ctx.world.pulls.items() if rid == repo.id
             and (state == "all" or p.issue.state == state)]
    if "base" in ctx.query:
        pulls = [p for p in pulls if p.base_ref == ctx.query["base"]]
    if "head" in ctx.query:
        pulls = [p for p in pulls
                 if f"{ctx.world.repos[p.head_repo_id or repo.id].owner.login}:{p.head_ref}"
                 == ctx.query["head"]]
    now = ctx.world.now()
    month = timedelta(days=30)
    if sort == "long-running":
        # GitHub: open for more than a month and active within the last month, by age.
        pulls = [p for p in pulls if p.issue.created_at <= now - month
                 and p.issue.updated_at >= now - month]

    def popularity(pr: PullRequest) -> int:
        return sum(1 for c in ctx.world.issue_comments.values()
                   if c.repo_id == repo.id and c.issue_number == pr.number) + sum(
            1 for c in ctx.world.review_comments.values()
            if c.repo_id == repo.id and c.pull_number == pr.number)

    keys = {
        "created": lambda p: (p.issue.created_at.timestamp(), p.number),
        "long-running": lambda p: (p.issue.created_at.timestamp(), p.number),
        "updated": lambda p: (p.issue.updated_at.timestamp(), p.number),
        "popularity": lambda p: (popularity(p), p.number),
    }
    pulls.sort(key=keys[sort], reverse=direction == "desc")
    return ctx.page([ctx.render.pull(p, full=False) for p in pulls])


def _too_large(ctx: Ctx, pr: PullRequest) -> ApiError | None:
    settings = ctx.world.settings
    if len(pr.head.files) > settings.max_diff_files:
        what = f"files ({settings.max_diff_files})"
    elif diff_line_count(pr.head.diff) > settings.max_diff_lines:
        what = f"lines ({settings.max_diff_lines})"
    else:
        return None
    return ApiError(406, f"Sorry, the diff exceeded the maximum number of {what}. "
                    f"{TOO_LARGE_HINT}",
                    errors=[{"resource": "PullRequest", "field": "diff", "code": "too_large"}],
                    documentation_url=FILES_DOCS)


@routes.add("GET", "/repos/{owner}/{repo}/pulls/{number}", auth="token")
async def get_pull(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_READ)
    accept = ctx.accept
    if "diff" in accept or "patch" in accept:
        error = _too_large(ctx, pr)
        if error is not None:
            raise error
        if "patch" in accept:
            text = (f"From {pr.head.head_sha} Mon Sep 17 00:00:00 2001\n"
                    f"From: {pr.issue.user.login}\nSubject: [PATCH] {pr.issue.title}\n\n---\n"
                    f"{pr.head.diff}")
            kind = "patch"
        else:
            text, kind = pr.head.diff, "diff"
        return Reply(text=text, content_type=f"application/vnd.github.{kind}; charset=utf-8",
                     last_modified=pr.issue.updated_at)
    return Reply(body=ctx.render.pull(pr, full=True), last_modified=pr.issue.updated_at)


@routes.add("PATCH", "/repos/{owner}/{repo}/pulls/{number}", auth="token")
async def update_pull(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_WRITE)
    body = ctx.json()
    world, repo = ctx.world, ctx.world.repos[pr.issue.repo_id]
    bot = world.apps[ctx.token.app_id].bot if ctx.token else None
    title, text = body.get("title"), body.get("body")
    if title is not None and (not isinstance(title, str) or not title.strip()):
        raise _invalid("title", title)
    world.edit_pull(repo.full_name, pr.number, title=title,
                    body=text if isinstance(text, str) else None, sender=bot)
    state = body.get("state")
    if state is not None and state != pr.issue.state:
        if state == "closed":
            world.close(repo.full_name, pr.number, sender=bot.login if bot else None)
        elif state == "open":
            world.reopen(repo.full_name, pr.number, sender=bot.login if bot else None)
        else:
            raise _invalid("state", state)
    return Reply(body=ctx.render.pull(pr, full=True))


@routes.add("GET", "/repos/{owner}/{repo}/pulls/{number}/files", auth="token")
async def list_files(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_READ)
    repo = ctx.world.repos[pr.issue.repo_id]
    files = pr.head.files[: ctx.world.settings.max_files_listed]
    return ctx.page([ctx.render.file(repo, pr, f) for f in files])


# -- reviews -----------------------------------------------------------------------------
def _visible(ctx: Ctx, review: Review) -> bool:
    """Only its author sees a PENDING review."""
    bot = ctx.world.apps[ctx.token.app_id].bot if ctx.token else None
    return review.state != "PENDING" or review.user is bot


def _review(ctx: Ctx, pr: PullRequest) -> Review:
    review = ctx.world.reviews.get(ctx.int_param("review_id"))
    if (review is None or review.repo_id != pr.issue.repo_id or review.pull_number != pr.number
            or not _visible(ctx, review)):
        raise not_found()
    return review


def _publish(ctx: Ctx, review: Review) -> None:
    """The webhooks GitHub sends when a review is submitted."""
    world = ctx.world
    world.emit("pull_request_review", world.payloads.pull_request_review("submitted", review))
    for comment in sorted(world.review_comments.values(), key=lambda c: c.id):
        if comment.review_id == review.id:
            world.emit("pull_request_review_comment",
                       world.payloads.pull_request_review_comment("created", comment))


@routes.add("GET", "/repos/{owner}/{repo}/pulls/{number}/reviews", auth="token")
async def list_reviews(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_READ)
    reviews = sorted((r for r in ctx.world.reviews.values()
                      if r.repo_id == pr.issue.repo_id and r.pull_number == pr.number
                      and _visible(ctx, r)), key=lambda r: r.id)
    return ctx.page([ctx.render.review(r) for r in reviews])


@routes.add("GET", "/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}", auth="token")
async def get_review(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_READ)
    return Reply(body=ctx.render.review(_review(ctx, pr)))


@routes.add("POST", "/repos/{owner}/{repo}/pulls/{number}/reviews", auth="token",
            creates_content=True)
async def create_review(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_WRITE)
    assert ctx.token is not None
    world, app = ctx.world, ctx.world.apps[ctx.token.app_id]
    body = ctx.json()
    event = body.get("event") or None
    if event not in EVENT_STATES:
        raise unprocessable(f"Invalid event: {event}", documentation_url=REVIEW_DOCS)
    commit_id = body.get("commit_id") or pr.head.head_sha
    revision = pr.revision(commit_id) if isinstance(commit_id, str) else None
    if revision is None:
        raise unprocessable(f"No commit found for SHA: {commit_id}", documentation_url=REVIEW_DOCS)
    if any(r.state == "PENDING" and r.user is app.bot and r.repo_id == pr.issue.repo_id
           and r.pull_number == pr.number for r in world.reviews.values()):
        raise unprocessable(ONE_PENDING, documentation_url=REVIEW_DOCS)
    text = body.get("body") or ""
    if not isinstance(text, str):
        raise unprocessable("Body must be a string", documentation_url=REVIEW_DOCS)
    prepared = prepare_comments(revision, body.get("comments"))
    if (event == "REQUEST_CHANGES" or (event == "COMMENT" and not prepared)) and not text:
        raise unprocessable(f"Body is required for {event} events",
                            documentation_url=REVIEW_DOCS)
    if event in ("APPROVE", "REQUEST_CHANGES") and pr.issue.user is app.bot:
        verb = "approve" if event == "APPROVE" else "request changes on"
        raise unprocessable(f"Can not {verb} your own pull request",
                            documentation_url=REVIEW_DOCS)
    repo = world.repos[pr.issue.repo_id]
    review = world.add_review(repo.full_name, pr.number, user=app.bot, body=text,
                              state=EVENT_STATES[event], commit_id=revision.head_sha,
                              app_id=app.id)
    now = world.now()
    for item in prepared:
        comment = ReviewComment(
            id=world.next_id(), repo_id=repo.id, pull_number=pr.number, review_id=review.id,
            user=app.bot, body=item.body, path=item.path, line=item.line, side=item.side,
            start_line=item.start_line, start_side=item.start_side,
            commit_id=revision.head_sha, original_commit_id=revision.head_sha,
            diff_hunk=item.diff_hunk, position=item.position, created_at=now, updated_at=now,
            app_id=app.id)
        world.review_comments[comment.id] = comment
    if review.state != "PENDING":
        world.touch(pr.issue)
        _publish(ctx, review)
    return Reply(status=200, body=ctx.render.review(review))


@routes.add("POST", "/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}/events",
            auth="token", creates_content=True)
async def submit_review(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_WRITE)
    review = _review(ctx, pr)
    body = ctx.json()
    event = body.get("event")
    if review.state != "PENDING":
        raise unprocessable("Can not submit a non-pending review", documentation_url=REVIEW_DOCS)
    if event not in ("APPROVE", "REQUEST_CHANGES", "COMMENT"):
        raise unprocessable(f"Invalid event: {event}", documentation_url=REVIEW_DOCS)
    text = body.get("body")
    if isinstance(text, str) and text:
        review.body = text
    if event == "REQUEST_CHANGES" and not review.body:
        raise unprocessable(f"Body is required for {event} events",
                            documentation_url=REVIEW_DOCS)
    review.state, review.submitted_at = EVENT_STATES[event], ctx.world.now()
    ctx.world.touch(pr.issue)
    _publish(ctx, review)
    return Reply(body=ctx.render.review(review))


@routes.add("DELETE", "/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}",
            auth="token")
async def delete_pending_review(ctx: Ctx) -> Reply:
    pr = _pull(ctx, PR_WRITE)
    review = _review(ctx, pr)
    if review.state != "PENDING":
        raise unprocessable("Can not delete a non-pending pull request review",
                            documentation_url=REVIEW_DOCS)
    body = ctx.render.review(review)
    for comment_id in [c.id for c in ctx.world.review_comments.values()
                       if c.review_id == review.id]:
        del ctx.world.review_comments[comment_id]
    del ctx.world.reviews[review.id]
    return Reply(body=body)

