"""``POST /graphql``: the part of GitHub's GraphQL API the App uses, with GitHub's shapes.

Served from the same ``World`` as the REST routes, through a real GraphQL executor
(graphql-core) on a subset of GitHub's schema: a pull request's review threads (their
comments, a comment's 👎 reactions, who resolved a thread, whether it is outdated) and the
``resolveReviewThread`` mutation. GraphQL answers 200 with an ``errors`` list, as GitHub
does: a connection asked for without ``first``/``last`` or with more than 100, a
repository or pull request the token cannot see (``NOT_FOUND``), a node id that names no
thread (``NOT_FOUND``), a mutation without ``pull_requests: write`` (``FORBIDDEN``). The
rate limit is the ``graphql`` resource's.

A thread is a root review comment and its replies (``in_reply_to_id``). It is outdated
when the diff hunk its root was written on no longer reads the same at the current head
(GitHub's "Outdated" label). People resolve threads with ``World.resolve_thread``.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from graphql import GraphQLError, GraphQLResolveInfo, build_schema, graphql

from .payloads import node_id
from .routing import Ctx, Reply, RouteTable

if TYPE_CHECKING:
    from .models import PullRequest, ReviewComment, User
    from .state import World

routes = RouteTable()

SDL: Final = """
type Query {
  repository(owner: String!, name: String!): Repository
  node(id: ID!): Node
}
type Mutation {
  resolveReviewThread(input: ResolveReviewThreadInput!): ResolveReviewThreadPayload
}
interface Node { id: ID! }
interface Actor { login: String! }
type User implements Actor & Node { id: ID! login: String! }
type Bot implements Actor & Node { id: ID! login: String! }
type PageInfo { hasNextPage: Boolean! endCursor: String }
type Repository implements Node {
  id: ID!
  nameWithOwner: String!
  pullRequest(number: Int!): PullRequest
}
type PullRequest implements Node {
  id: ID!
  number: Int!
  reviewThreads(first: Int, last: Int, after: String): PullRequestReviewThreadConnection!
}
type PullRequestReviewThreadConnection {
  nodes: [PullRequestReviewThread]
  pageInfo: PageInfo!
  totalCount: Int!
}
type PullRequestReviewThread implements Node {
  id: ID!
  isResolved: Boolean!
  isOutdated: Boolean!
  path: String!
  line: Int
  resolvedBy: User
  viewerCanResolve: Boolean!
  comments(first: Int, last: Int, after: String): PullRequestReviewCommentConnection!
}
type PullRequestReviewCommentConnection {
  nodes: [PullRequestReviewComment]
  pageInfo: PageInfo!
  totalCount: Int!
}
enum CommentAuthorAssociation {
  COLLABORATOR CONTRIBUTOR FIRST_TIMER FIRST_TIME_CONTRIBUTOR MANNEQUIN MEMBER NONE OWNER
}
enum ReactionContent {
  THUMBS_UP THUMBS_DOWN LAUGH HOORAY CONFUSED HEART ROCKET EYES
}
type PullRequestReviewComment implements Node {
  id: ID!
  databaseId: Int
  body: String!
  author: Actor
  authorAssociation: CommentAuthorAssociation!
  reactions(first: Int, last: Int, after: String, content: ReactionContent): ReactionConnection!
}
type ReactionConnection { nodes: [Reaction] pageInfo: PageInfo! totalCount: Int! }
type Reaction implements Node { id: ID! content: ReactionContent! user: User }
input ResolveReviewThreadInput { threadId: ID! clientMutationId: String }
type ResolveReviewThreadPayload {
  thread: PullRequestReviewThread
  clientMutationId: String
}
"""

_REACTIONS: Final = {"+1": "THUMBS_UP", "-1": "THUMBS_DOWN", "laugh": "LAUGH",
                     "hooray": "HOORAY", "confused": "CONFUSED", "heart": "HEART",
                     "rocket": "ROCKET", "eyes": "EYES"}


class _Typed(GraphQLError):
    """A GraphQL error with GitHub's ``type`` (``NOT_FOUND``, ``FORBIDDEN``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message, extensions={"type": kind})


@dataclass
class _Thread:
    pr: PullRequest
    root: ReviewComment
    comments: list[ReviewComment]


def _user(user: User | None) -> dict[str, Any] | None:
    if user is None:
        return None
    return {"__typename": "Bot" if user.type == "Bot" else "User",
            "id": node_id("U", user.id), "login": user.login}


def _connection(items: Sequence[Any], kwargs: dict[str, Any], name: str) -> dict[str, Any]:
    """One page of ``items``, checked the way GitHub checks a connection's arguments."""
    first, last = kwargs.get("first"), kwargs.get("last")
    if first is None and last is None:
        raise GraphQLError(f"You must provide a `first` or `last` value to properly paginate "
                           f"the `{name}` connection.")
    for arg, value in (("first", first), ("last", last)):
        if value is not None and value > 100:
            raise GraphQLError(f"Requesting {value} records on the `{name}` connection "
                               f"exceeds the `{arg}` limit of 100 records.")
    start = 0
    if kwargs.get("after"):
        start = int(base64.b64decode(kwargs["after"]).decode().split(":")[1]) + 1
    end = min(len(items), start + first) if first is not None else len(items)
    if first is None and last is not None:
        start = max(start, end - last)
    page = list(items[start:end])
    cursor = base64.b64encode(f"cursor:{end - 1}".encode()).decode() if page else None
    return {"nodes": page, "totalCount": len(items),
            "pageInfo": {"hasNextPage": end < len(items), "endCursor": cursor}}


class GraphQLApi:
    """The executor for one request: resolvers reading ``world`` as ``ctx``'s token sees it."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.world: World = ctx.world
        self.schema = build_schema(SDL)
        self._wire()

    def _wire(self) -> None:
        types = self.schema.type_map
        fields = {
            ("Query", "repository"): self.repository,
            ("Query", "node"): self.node,
            ("Repository", "pullRequest"): self.pull_request,
            ("PullRequest", "reviewThreads"): self.review_threads,
            ("PullRequestReviewThread", "comments"): self.thread_comments,
            ("PullRequestReviewComment", "reactions"): self.reactions,
            ("Mutation", "resolveReviewThread"): self.resolve_review_thread,
        }
        for (type_name, field_name), resolver in fields.items():
            types[type_name].fields[field_name].resolve = resolver  # type: ignore[attr-defined]
        for name in ("Actor", "Node"):
            types[name].resolve_type = (  # type: ignore[attr-defined]
                lambda value, *_: value.get("__typename"))

    # -- reads --------------------------------------------------------------------------

    def repository(self, _: object, info: GraphQLResolveInfo, owner: str,
                   name: str) -> dict[str, Any]:
        repo = self.world.find_repo(owner, name)
        token = self.ctx.token
        inst = None if token is None else self.world.installations.get(token.installation_id)
        visible = (repo is not None and inst is not None
                   and repo in self.world.installation_repos(inst)
                   and (token is None or token.repository_ids is None
                        or repo.id in token.repository_ids))
        if not visible or repo is None:
            raise _Typed("NOT_FOUND",
                         f"Could not resolve to a Repository with the name '{owner}/{name}'.")
        return {"__typename": "Repository", "id": node_id("R", repo.id),
                "nameWithOwner": repo.full_name, "_repo": repo}

    def pull_request(self, parent: dict[str, Any], info: GraphQLResolveInfo,
                     number: int) -> dict[str, Any]:
        repo = parent["_repo"]
        pr = self.world.pulls.get((repo.id, number))
        if pr is None:
            raise _Typed("NOT_FOUND",
                         f"Could not resolve to a PullRequest with the number of {number}.")
        return {"__typename": "PullRequest", "id": node_id("PR", pr.id), "number": number,
                "_pr": pr}

    def _threads(self, pr: PullRequest) -> list[_Thread]:
        mine = [c for c in self.world.review_comments.values()
                if c.repo_id == pr.issue.repo_id and c.pull_number == pr.number]
        roots = sorted((c for c in mine if c.in_reply_to_id is None), key=lambda c: c.id)
        return [_Thread(pr, root, sorted((c for c in mine if c.id == root.id
                                          or c.in_reply_to_id == root.id), key=lambda c: c.id))
                for root in roots]

    def _thread(self, thread: _Thread) -> dict[str, Any]:
        root, head = thread.root, thread.pr.head
        diff = next((f for f in head.files if f.path == root.path), None)
        side = "LEFT" if root.side == "LEFT" else "RIGHT"
        hunk = diff.hunk_at(side, root.line) if diff is not None and root.line else None
        outdated = hunk is None or hunk.text_through(side, root.line or 0) != root.diff_hunk
        resolver = self.world.thread_resolutions.get(root.id)
        return {"__typename": "PullRequestReviewThread", "id": node_id("PRRT", root.id),
                "isResolved": resolver is not None, "isOutdated": outdated,
                "path": root.path, "line": None if outdated else root.line,
                "resolvedBy": _user(resolver) if resolver and resolver.type != "Bot" else None,
                "viewerCanResolve": self.ctx.has("pull_requests", "write"), "_thread": thread}

    def review_threads(self, parent: dict[str, Any], info: GraphQLResolveInfo,
                       **kwargs: Any) -> dict[str, Any]:
        threads = [self._thread(t) for t in self._threads(parent["_pr"])]
        return _connection(threads, kwargs, "reviewThreads")

    def thread_comments(self, parent: dict[str, Any], info: GraphQLResolveInfo,
                        **kwargs: Any) -> dict[str, Any]:
        pr = parent["_thread"].pr
        comments = [{"__typename": "PullRequestReviewComment",
                     "id": node_id("PRRC", c.id), "databaseId": c.id, "body": c.body,
                     "author": _user(c.user),
                     "authorAssociation": self.world.association(pr, c.user), "_comment": c}
                    for c in parent["_thread"].comments]
        return _connection(comments, kwargs, "comments")

    def reactions(self, parent: dict[str, Any], info: GraphQLResolveInfo,
                  **kwargs: Any) -> dict[str, Any]:
        wanted = kwargs.pop("content", None)
        found = [{"__typename": "Reaction", "id": node_id("REA", r.id),
                  "content": _REACTIONS.get(r.content, "EYES"), "user": _user(r.user)}
                 for r in parent["_comment"].reactions
                 if wanted is None or _REACTIONS.get(r.content) == wanted]
        return _connection(found, kwargs, "reactions")

    def node(self, _: object, info: GraphQLResolveInfo, id: str) -> dict[str, Any]:
        thread = self._find_thread(id)
        return self._thread(thread)

    def _find_thread(self, thread_id: str) -> _Thread:
        for pr in self.world.pulls.values():
            for thread in self._threads(pr):
                if node_id("PRRT", thread.root.id) == thread_id and self._sees(pr):
                    return thread
        raise _Typed("NOT_FOUND", f"Could not resolve to a node with the global id of "
                                  f"'{thread_id}'")

    def _sees(self, pr: PullRequest) -> bool:
        token = self.ctx.token
        inst = None if token is None else self.world.installations.get(token.installation_id)
        repo = self.world.repos.get(pr.issue.repo_id)
        return (inst is not None and repo is not None
                and repo in self.world.installation_repos(inst))

    # -- the mutation -------------------------------------------------------------------

    def resolve_review_thread(self, _: object, info: GraphQLResolveInfo,
                              input: dict[str, Any]) -> dict[str, Any]:
        thread = self._find_thread(str(input["threadId"]))
        if not self.ctx.has("pull_requests", "write"):
            raise _Typed("FORBIDDEN", "Resource not accessible by integration")
        token = self.ctx.token
        assert token is not None
        self.world.thread_resolutions[thread.root.id] = self.world.apps[token.app_id].bot
        return {"thread": self._thread(thread),
                "clientMutationId": input.get("clientMutationId")}


@routes.add("POST", "/graphql", auth="token")
async def execute(ctx: Ctx) -> Reply:
    body = ctx.json()
    query = body.get("query")
    if not isinstance(query, str):
        return Reply(body={"errors": [{"message": "A query attribute must be specified and "
                                                  "must be a string."}]})
    variables = body.get("variables")
    api = GraphQLApi(ctx)
    result = await graphql(api.schema, query, variable_values=variables
                           if isinstance(variables, dict) else None)
    answer: dict[str, Any] = {}
    if result.data is not None:
        answer["data"] = result.data
    if result.errors:
        answer["errors"] = [_error(e) for e in result.errors]
    return Reply(body=answer)


def _error(error: GraphQLError) -> dict[str, Any]:
    shaped: dict[str, Any] = {"message": error.message}
    if error.extensions and "type" in error.extensions:
        shaped["type"] = error.extensions["type"]
    if error.path:
        shaped["path"] = list(error.path)
    if error.locations:
        shaped["locations"] = [{"line": loc.line, "column": loc.column}
                               for loc in error.locations]
    return shaped
