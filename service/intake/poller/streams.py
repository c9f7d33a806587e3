"""The poller's two streams as pure rules: what to fetch, what is new, what it means.

Nothing here does I/O or reads a clock. ``cycle.py`` fetches the pages and applies the
decisions; this module answers, for each object a listing returned, "has this already
been considered?" and "which webhook action would have told us about it?".

Two streams per repository, each with its own watermark (``watermark_key(stream, repo)``):

- ``pull_requests``: ``GET /repos/{o}/{r}/pulls?state=all&sort=updated&direction=desc``,
  paged only until ``updated_at`` drops below the watermark. Sorting by *updated* (not
  created) is what lets the poller see a pull request that was opened before the
  watermark and later marked ready, reopened, pushed to or closed.
- ``comments``: ``GET /repos/{o}/{r}/issues/comments`` and ``GET /repos/{o}/{r}/pulls/comments``
  with ``since=<watermark>&sort=updated&direction=asc``. Both endpoints share the one mark.

GitHub's timestamps have one-second resolution, so several objects can share the
watermark's instant, and one of them may appear after the poll that set it. The
``Boundary`` (what this process saw at exactly that instant) tells a new object at the
watermark from one already considered. After a restart ``cycle.py`` replays the items at
a mark a regular poll set (an empty but known boundary: every decision is an idempotent
insert) and keeps a cold start's mark unknown, so everything at it counts as considered.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from service.github.payload import PayloadError, github_time, positive_int
from service.github.pulls import PullRequest
from service.github.urls import repo_path
from service.model.jobs import CommentSource

PULL_REQUESTS: Final = "pull_requests"
COMMENTS: Final = "comments"
STREAMS: Final = (PULL_REQUESTS, COMMENTS)

PER_PAGE: Final = 100  # GitHub's maximum: the fewest requests for a busy interval

EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The seed of a stream that has no items at all: everything that appears later is new."""

Params = Mapping[str, str | int | bool]


@dataclass(frozen=True)
class Endpoint:
    """One listing: its path, its query, and (for comments) which kind it lists."""

    path: str
    params: Params
    source: CommentSource | None = None


def _base(repo: str) -> str:
    owner, sep, name = repo.partition("/")
    if not sep:
        raise ValueError(f"repository {repo!r} must be 'owner/name'")
    return repo_path(owner, name)


def pulls_endpoint(repo: str) -> Endpoint:
    """Every pull request, open or closed, most recently updated first.

    The same URL serves the cold-start seed and every later cycle, so the ETag stored by
    one request is what the next one sends.
    """
    return Endpoint(f"{_base(repo)}/pulls",
                    {"state": "all", "sort": "updated", "direction": "desc",
                     "per_page": PER_PAGE})


def comment_endpoints(repo: str, since: datetime) -> tuple[Endpoint, Endpoint]:
    """Conversation and diff comments updated at or after ``since``, oldest update first."""
    params: Params = {"since": since_param(since), "sort": "updated", "direction": "asc",
                      "per_page": PER_PAGE}
    base = _base(repo)
    return (Endpoint(f"{base}/issues/comments", params, "issue"),
            Endpoint(f"{base}/pulls/comments", params, "review"))


def comment_seed_endpoints(repo: str) -> tuple[Endpoint, Endpoint]:
    """The newest comments of each kind: where a cold start puts the comments mark."""
    params: Params = {"sort": "updated", "direction": "desc", "per_page": PER_PAGE}
    base = _base(repo)
    return (Endpoint(f"{base}/issues/comments", params, "issue"),
            Endpoint(f"{base}/pulls/comments", params, "review"))


def since_param(at: datetime) -> str:
    """``at`` as GitHub's ``since`` value, floored to the second (``since`` is inclusive,
    so flooring can only return more, never less)."""
    _require_aware(at)
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _require_aware(at: datetime) -> None:
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"naive datetime {at.isoformat()} refused: times must be aware")


# -- the boundary ------------------------------------------------------------------------


@dataclass(frozen=True)
class Boundary:
    """What this process saw at exactly the watermark instant ``at``.

    ``seen`` holds pull request numbers (pull_requests) or ``(source, comment_id)`` pairs
    (comments). It is only meaningful while the stored watermark is still ``at``.
    """

    at: datetime
    seen: frozenset[Hashable] = field(default_factory=frozenset)


def boundary_known(boundary: Boundary | None, watermark: datetime) -> bool:
    """True when ``boundary`` describes this watermark (it does not after a restart)."""
    return boundary is not None and boundary.at == watermark


def next_boundary(
    previous: Boundary | None, watermark: datetime, new_mark: datetime,
    keys_at_new_mark: Iterable[Hashable],
) -> Boundary:
    """The boundary after a complete listing of everything at or after ``watermark``.

    Every object at ``new_mark`` in that listing has now been considered, so the set is
    those objects, plus what was already known at the mark when it did not move.
    """
    keys = frozenset(keys_at_new_mark)
    if new_mark == watermark and boundary_known(previous, watermark):
        assert previous is not None
        keys |= previous.seen
    return Boundary(new_mark, keys)


# -- comments ------------------------------------------------------------------------------


class CommentSighting(enum.Enum):
    """What a comment in a ``since`` listing is: already considered, new, or edited."""

    SKIP = "skip"        # already considered (at the watermark, seen before)
    CREATED = "created"  # the webhook would have said ``created``
    EDITED = "edited"    # seen before, back in the listing because it was edited


def comment_sighting(
    key: Hashable, created_at: datetime, updated_at: datetime, watermark: datetime,
    boundary: Boundary | None,
) -> CommentSighting:
    """Classify one comment of a listing polled from ``watermark``.

    A comment created after the watermark is new (whatever its current text: we never saw
    an earlier one). One created before it is back because it was edited, and an edit
    never triggers. At the watermark's own second the boundary decides; unknown, it
    counts as seen (edited), so a restart never replays a request.
    """
    known = boundary_known(boundary, watermark)
    seen = known and boundary is not None and key in boundary.seen
    if updated_at < watermark:
        return CommentSighting.SKIP
    if updated_at == watermark and (not known or seen):
        return CommentSighting.SKIP
    if created_at > watermark:
        return CommentSighting.CREATED
    if created_at < watermark or not known or seen:
        return CommentSighting.EDITED
    return CommentSighting.CREATED


@dataclass(frozen=True)
class CommentItem:
    """A listed comment: which endpoint it came from, the object, and its times."""

    source: CommentSource
    obj: Mapping[str, Any]
    comment_id: int
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> tuple[str, int]:
        """Its name in a ``Boundary``."""
        return (self.source, self.comment_id)


def parse_comment(obj: object, source: CommentSource) -> CommentItem:
    """A comment listing item; ``PayloadError`` when its id or times are unusable."""
    if not isinstance(obj, Mapping):
        raise PayloadError("comment: expected a JSON object")
    return CommentItem(source=source, obj=obj, comment_id=positive_int(obj, "id", "comment"),
                       created_at=github_time(obj, "created_at", "comment"),
                       updated_at=github_time(obj, "updated_at", "comment"))


# -- pull requests -------------------------------------------------------------------------


@dataclass(frozen=True)
class PullHistory:
    """What the store says about a pull request (read inside the apply transaction).

    ``known_heads``: every head a ``pr_opened`` row was enqueued for. ``reopened``: a
    closure was recorded after its newest ``pr_opened`` row (or it has none), and it is
    open again.
    """

    known_heads: frozenset[str]
    reopened: bool


class PullAction(enum.Enum):
    SKIP = "skip"          # nothing a webhook would have acted on
    CLOSE = "close"        # ``closed``: cancel pending rows, record the closure
    REVIEW = "review"      # ``opened`` / ``reopened`` / ``ready_for_review``
    PUSH = "push"          # ``synchronize``: ``triggers.on_push`` decides


@dataclass(frozen=True)
class PullDecision:
    action: PullAction
    why: str


def pull_action(
    pr: PullRequest, previous: PullRequest | None, history: PullHistory, watermark: datetime,
    boundary: Boundary | None,
) -> PullDecision:
    """Which webhook action a pull request updated since ``watermark`` stands for.

    ``previous`` is how this process last saw it (``PullMemory``), ``None`` if never.
    The rules, in order:

    - at the watermark's own second: considered unless the boundary says it is new;
    - closed: ``CLOSE`` if the closure is not older than the watermark and not the one
      already seen, else nothing (a comment on a long-closed pull request);
    - a draft: ``REVIEW``, which the trigger rules turn into ``Ignore("draft")``;
    - seen before: closed then → reopened, a draft then → ready, another head → push;
    - never seen (by this process: the first sighting after a start): created after the
      watermark → opened; a closure recorded since its last enqueue → reopened; its head
      already queued → nothing; another head than the ones queued for it → a push (the
      queue is durable evidence of the head before); **no head queued for it at all →
      nothing**. A push to it, a comment on it (a bot's included) and a ready-for-review
      look the same here, and a restart must not spend allowance: a first sighting with
      nothing durable to compare is never taken for a push — the rule the cold start
      follows too. (The webhook still delivers a real push.)
    """
    known = boundary_known(boundary, watermark)
    if pr.updated_at < watermark:
        return PullDecision(PullAction.SKIP, "older than the watermark")
    if pr.updated_at == watermark:
        if not known:
            return PullDecision(PullAction.SKIP, "at the watermark; considered before")
        if previous is not None and pr.same_as(previous):
            return PullDecision(PullAction.SKIP, "at the watermark; unchanged")
    if pr.state == "closed":
        if previous is not None and previous.state == "closed" and (
                previous.closed_at == pr.closed_at):
            return PullDecision(PullAction.SKIP, "closure already seen")
        if pr.closed_at is not None and pr.closed_at < watermark:
            return PullDecision(PullAction.SKIP, "closed before the watermark")
        return PullDecision(PullAction.CLOSE, "closed")
    if pr.draft:
        return PullDecision(PullAction.REVIEW, "draft")
    if previous is not None:
        if previous.state == "closed":
            return PullDecision(PullAction.REVIEW, "reopened")
        if previous.draft:
            return PullDecision(PullAction.REVIEW, "ready for review")
        if previous.head_sha != pr.head_sha:
            return PullDecision(PullAction.PUSH, "new head")
        if history.reopened:
            return PullDecision(PullAction.REVIEW, "reopened (closure recorded)")
        return PullDecision(PullAction.SKIP, "unchanged")
    if pr.created_at > watermark or (pr.created_at == watermark and known):
        return PullDecision(PullAction.REVIEW, "opened")
    if history.reopened:
        return PullDecision(PullAction.REVIEW, "reopened (closure recorded)")
    if pr.head_sha in history.known_heads:
        return PullDecision(PullAction.SKIP, "head already queued")
    if history.known_heads:
        return PullDecision(PullAction.PUSH, "a head the queue has not seen")
    return PullDecision(PullAction.SKIP, "first sighting, no head queued before: not a push")


class PullMemory:
    """How this process last saw each pull request, least recently seen evicted first.

    Memory is what turns two snapshots into the action between them (draft then ready,
    closed then open, one head then another). It is an optimisation of precision, not of
    safety: a forgotten pull request falls back to the store's history and to the
    conservative rules of ``pull_action``.
    """

    def __init__(self, max_entries: int = 50_000) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max = max_entries
        self._entries: OrderedDict[tuple[str, int], PullRequest] = OrderedDict()

    def get(self, repo: str, number: int) -> PullRequest | None:
        return self._entries.get((repo, number))

    def remember(self, repo: str, pr: PullRequest) -> None:
        key = (repo, pr.number)
        self._entries[key] = pr
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
