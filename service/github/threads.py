"""A pull request's review threads, through GitHub's GraphQL API (REST has no threads).

``review_threads`` reads every thread (50 a page, following ``endCursor``) with what the
App needs to know about its own findings: whether a thread is resolved and by whom,
whether it is outdated (the code it was written on has changed), and each comment's
author, association, text and 👎 reactions. ``resolve_thread`` is the
``resolveReviewThread`` mutation. GraphQL answers 200 with an ``errors`` list; an answer
that carries errors (and no data where it was asked) raises ``GraphQLFailed`` with
GitHub's error ``type`` (``NOT_FOUND``, ``FORBIDDEN``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.urls import GRAPHQL_PATH

#: Threads per page, and comments and 👎 read per thread: a thread longer than that is
#: read up to its first 50 comments (declines come early in a thread, in practice).
PAGE: Final = 50
REACTIONS: Final = 20

THREADS_QUERY: Final = """
query($owner: String!, $name: String!, $number: Int!, $after: String, $page: Int!,
      $reactions: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: $page, after: $after) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id isResolved isOutdated
          resolvedBy { login }
          comments(first: $page) {
            nodes {
              databaseId body authorAssociation
              author { login }
              reactions(content: THUMBS_DOWN, first: $reactions) { nodes { user { login } } }
            }
          }
        }
      }
    }
  }
}
"""

RESOLVE_MUTATION: Final = """
mutation($thread: ID!) {
  resolveReviewThread(input: {threadId: $thread}) { thread { id isResolved } }
}
"""


class GraphQLFailed(GitHubError):
    """GitHub's GraphQL answer carried errors; ``kind`` is the first one's ``type``."""

    def __init__(self, message: str, *, kind: str | None) -> None:
        super().__init__(message, status=200, method="POST", path="/graphql")
        self.kind = kind


@dataclass(frozen=True)
class ThreadComment:
    """One comment of a thread."""

    id: int
    login: str            # "" for a deleted account
    association: str      # OWNER, MEMBER, ... as GitHub reports it
    body: str
    thumbs_down: tuple[str, ...]  # logins that reacted 👎


@dataclass(frozen=True)
class Thread:
    """One review thread: its root comment first."""

    id: str
    resolved: bool
    resolved_by: str | None   # a person's login; None when unresolved or resolved by an App
    outdated: bool
    comments: tuple[ThreadComment, ...]

    @property
    def root_id(self) -> int | None:
        return self.comments[0].id if self.comments else None


async def graphql(github: GitHubClient, installation: int, query: str,
                  variables: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``data`` of one GraphQL request, or ``GraphQLFailed``."""
    answer = await github.post_json(installation, GRAPHQL_PATH,
                                    {"query": query, "variables": dict(variables)})
    if not isinstance(answer, Mapping):
        raise GraphQLFailed("GitHub's GraphQL answer is not an object", kind=None)
    errors = answer.get("errors")
    if isinstance(errors, list) and errors:
        first = errors[0] if isinstance(errors[0], Mapping) else {}
        kind = first.get("type")
        raise GraphQLFailed(str(first.get("message") or "GraphQL error"),
                            kind=kind if isinstance(kind, str) else None)
    data = answer.get("data")
    if not isinstance(data, Mapping):
        raise GraphQLFailed("GitHub's GraphQL answer has no data", kind=None)
    return data


async def review_threads(github: GitHubClient, installation: int, repo: str,
                         pr_number: int) -> list[Thread]:
    """Every review thread of the pull request, oldest first."""
    owner, _, name = repo.partition("/")
    threads: list[Thread] = []
    after: str | None = None
    while True:
        data = await graphql(github, installation, THREADS_QUERY,
                             {"owner": owner, "name": name, "number": pr_number,
                              "after": after, "page": PAGE, "reactions": REACTIONS})
        connection = _dig(data, "repository", "pullRequest", "reviewThreads")
        threads += [t for t in map(_thread, _nodes(connection)) if t is not None]
        info = connection.get("pageInfo") if isinstance(connection, Mapping) else None
        cursor = info.get("endCursor") if isinstance(info, Mapping) else None
        if not (isinstance(info, Mapping) and info.get("hasNextPage") is True
                and isinstance(cursor, str)):
            return threads
        after = cursor


async def resolve_thread(github: GitHubClient, installation: int, thread_id: str) -> None:
    """Resolve one thread as the App (resolving a resolved thread changes nothing)."""
    await graphql(github, installation, RESOLVE_MUTATION, {"thread": thread_id})


# -- GitHub's shapes, read defensively ---------------------------------------------------


def _dig(data: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    value: Any = data
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    if not isinstance(value, Mapping):
        raise GraphQLFailed(f"GitHub's GraphQL answer has no {'.'.join(keys)}", kind=None)
    return value


def _nodes(connection: Any) -> Sequence[Mapping[str, Any]]:
    nodes = connection.get("nodes") if isinstance(connection, Mapping) else None
    return [n for n in nodes if isinstance(n, Mapping)] if isinstance(nodes, list) else []


def _login(actor: Any) -> str:
    login = actor.get("login") if isinstance(actor, Mapping) else None
    return login if isinstance(login, str) else ""


def _comment(node: Mapping[str, Any]) -> ThreadComment | None:
    ident = node.get("databaseId")
    if not isinstance(ident, int) or isinstance(ident, bool):
        return None
    body, association = node.get("body"), node.get("authorAssociation")
    downs = tuple(_login(r.get("user")) for r in _nodes(node.get("reactions")))
    return ThreadComment(id=ident, login=_login(node.get("author")),
                         association=association if isinstance(association, str) else "NONE",
                         body=body if isinstance(body, str) else "",
                         thumbs_down=tuple(d for d in downs if d))


def _thread(node: Mapping[str, Any]) -> Thread | None:
    ident = node.get("id")
    if not isinstance(ident, str):
        return None
    comments = tuple(c for c in map(_comment, _nodes(node.get("comments"))) if c is not None)
    resolver = _login(node.get("resolvedBy"))
    return Thread(id=ident, resolved=node.get("isResolved") is True,
                  resolved_by=resolver or None, outdated=node.get("isOutdated") is True,
                  comments=comments)
