"""The activity routes (``python -m tests.simulator --activity``): what people do on
GitHub, for a driver in another process.

In front of the simulator's own routes, ``/_simulator/activity/`` does to the world what
an in-process test does with its ``World`` object, and reads back what the App posted:

    POST /_simulator/activity/pulls     {"repo", "title", "user", "head_sha", "base_sha",
                                         "head_ref"?, "base_ref"?, "body"?, "emit"?}
                                        -> {"number", "created_at"}
    POST /_simulator/activity/comments  {"repo", "number", "user", "body", "emit"?}
                                        -> {"id", "created_at"}
    POST /_simulator/activity/events/take   the webhooks emitted so far, removed from the
                                        world
    GET  /_simulator/activity/posts     every review, conversation comment, pull request
                                        body, reaction and check run, with their authors
    GET  /_simulator/activity/reactions every reaction POST received: path, status, and
                                        the host's monotonic clock when it arrived
                                        (comparable across processes on one Linux host)

``emit`` false means GitHub sends no webhook for it: only the poller can find it. The world
is single-threaded: these handlers run on uvicorn's event loop like every other request.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .clock import iso
from .state import World

PREFIX = "/_simulator/activity/"


class ActivityRoutes:
    """``app`` (the simulator) with the activity routes in front of it."""

    def __init__(self, world: World, app: ASGIApp) -> None:
        self.world = world
        self.simulator = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.simulator(scope, receive, send)
            return
        request = Request(scope, receive)
        body = await request.body()
        try:
            data = json.loads(body) if body.strip() else {}
            reply = self.handle(request.method, scope["path"][len(PREFIX):].rstrip("/"), data)
            response = _json(reply, 200)
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            response = _json({"message": f"bad activity request: {type(exc).__name__}: {exc}"},
                             400)
        await response(scope, receive, send)

    def handle(self, method: str, route: str, data: dict[str, Any]) -> Any:
        world = self.world
        if (method, route) == ("POST", "pulls"):
            pr = world.add_pull(
                data["repo"], title=data["title"], user=data["user"],
                head_sha=data["head_sha"], base_sha=data["base_sha"], diff=None,
                head_ref=data.get("head_ref", "feature"), base_ref=data.get("base_ref", "main"),
                body=data.get("body", ""), emit=bool(data.get("emit", True)))
            return {"number": pr.number, "created_at": iso(pr.issue.created_at)}
        if (method, route) == ("POST", "comments"):
            comment = world.add_issue_comment(data["repo"], int(data["number"]),
                                              user=data["user"], body=data["body"],
                                              emit=bool(data.get("emit", True)))
            return {"id": comment.id, "created_at": iso(comment.created_at)}
        if (method, route) == ("POST", "events/take"):
            taken, world.events[:] = list(world.events), []
            return [{"event": e.event, "action": e.action, "delivery_id": e.delivery_id,
                     "payload": e.payload} for e in taken]
        if (method, route) == ("GET", "posts"):
            return self.posts()
        if (method, route) == ("GET", "reactions"):
            return [{"path": r.path, "status": r.status, "monotonic": r.monotonic}
                    for r in world.requests
                    if r.method == "POST" and r.path.endswith("/reactions")]
        raise KeyError(f"no route {method} {PREFIX}{route}")

    def posts(self) -> dict[str, Any]:
        world = self.world
        repos = {repo.id: repo.full_name for repo in world.repos.values()}
        reactions = []
        for issue in world.issues.values():
            reactions += [{"on": "issue", "repo": repos[issue.repo_id], "number": issue.number,
                           "user": r.user.login, "content": r.content,
                           "created_at": iso(r.created_at)} for r in issue.reactions]
        for comment in world.issue_comments.values():
            reactions += [{"on": "issue_comment", "repo": repos[comment.repo_id],
                           "number": comment.issue_number, "comment_id": comment.id,
                           "user": r.user.login, "content": r.content,
                           "created_at": iso(r.created_at)} for r in comment.reactions]
        return {
            "now": iso(world.now()),
            "reviews": [{"id": r.id, "repo": repos[r.repo_id], "number": r.pull_number,
                         "user": r.user.login, "user_type": r.user.type, "state": r.state,
                         "body": r.body, "commit_id": r.commit_id}
                        for r in world.reviews.values()],
            "issue_comments": [{"id": c.id, "repo": repos[c.repo_id], "number": c.issue_number,
                                "user": c.user.login, "user_type": c.user.type,
                                "body": c.body, "created_at": iso(c.created_at)}
                               for c in world.issue_comments.values()],
            "pull_bodies": [{"repo": repos[pr.issue.repo_id], "number": pr.number,
                             "body": pr.issue.body} for pr in world.pulls.values()],
            "reactions": reactions,
            "check_runs": [{"id": c.id, "repo": repos[c.repo_id], "head_sha": c.head_sha,
                            "name": c.name, "external_id": c.external_id,
                            "status": c.status, "conclusion": c.conclusion, "title": c.title}
                           for c in world.check_runs.values()],
        }


def _json(body: Any, status: int) -> Response:
    return Response(json.dumps(body), status_code=status, media_type="application/json")
