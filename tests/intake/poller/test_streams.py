"""The poller's pure rules: what is new in a listing and which action it stands for."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.github.payload import PayloadError, github_time
from service.github.pulls import PullRequest, parse_listed_pull
from service.intake.poller.streams import (
    Boundary,
    CommentSighting,
    PullAction,
    PullHistory,
    PullMemory,
    comment_endpoints,
    comment_sighting,
    next_boundary,
    parse_comment,
    pull_action,
    pulls_endpoint,
    since_param,
)

W = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # the watermark
BEFORE, AFTER = W - timedelta(seconds=5), W + timedelta(seconds=5)
NONE = PullHistory(known_heads=frozenset(), reopened=False)
A, B = "a" * 40, "b" * 40


def pr(*, number: int = 1, state: str = "open", draft: bool = False, head: str = A,
       created: datetime = BEFORE, updated: datetime = AFTER,
       closed: datetime | None = None) -> PullRequest:
    return PullRequest(number=number, state=state, draft=draft, head_sha=head,
                     created_at=created, updated_at=updated, closed_at=closed)


# -- endpoints -----------------------------------------------------------------------------


def test_pull_requests_are_listed_by_update_newest_first_including_closed() -> None:
    endpoint = pulls_endpoint("acme/widgets")
    assert endpoint.path == "/repos/acme/widgets/pulls"
    assert dict(endpoint.params) == {"state": "all", "sort": "updated", "direction": "desc",
                                     "per_page": 100}


def test_both_comment_endpoints_share_one_since() -> None:
    issue, review = comment_endpoints("acme/widgets", W + timedelta(microseconds=900))
    assert (issue.path, issue.source) == ("/repos/acme/widgets/issues/comments", "issue")
    assert (review.path, review.source) == ("/repos/acme/widgets/pulls/comments", "review")
    for endpoint in (issue, review):
        assert dict(endpoint.params) == {"since": "2026-03-02T09:00:00Z", "sort": "updated",
                                         "direction": "asc", "per_page": 100}


def test_endpoints_refuse_a_path_in_a_repository_name() -> None:
    with pytest.raises(ValueError, match="owner/name"):
        pulls_endpoint("widgets")
    with pytest.raises(ValueError):
        pulls_endpoint("acme/../x")


def test_since_is_floored_to_the_second_and_refuses_naive_times() -> None:
    assert since_param(datetime(2026, 3, 2, 10, 0, 0, 999_999, tzinfo=UTC)) == (
        "2026-03-02T10:00:00Z")
    with pytest.raises(ValueError, match="naive"):
        since_param(datetime(2026, 3, 2, 10, 0))


def test_github_times_parse_and_bad_ones_name_the_field() -> None:
    assert github_time({"t": "2026-03-02T09:00:00Z"}, "t", "x") == W
    for bad in (None, 5, "yesterday", "2026-03-02T09:00:00"):
        with pytest.raises(PayloadError, match=r"x\.t"):
            github_time({"t": bad}, "t", "x")


def test_parse_pull_reads_the_list_shape_and_rejects_what_it_cannot_use() -> None:
    obj = {"number": 4, "state": "closed", "draft": False, "head": {"sha": A.upper()},
           "created_at": "2026-03-02T08:00:00Z", "updated_at": "2026-03-02T09:00:00Z",
           "closed_at": "2026-03-02T09:00:00Z"}
    expected = PullRequest(4, "closed", False, A, W - timedelta(hours=1), W, W)
    assert parse_listed_pull(obj) == expected
    for broken in ({**obj, "number": True}, {**obj, "state": "merged"}, {**obj, "head": {}},
                   {**obj, "updated_at": None}, ["not", "an", "object"]):
        with pytest.raises(PayloadError):
            parse_listed_pull(broken)


# -- the boundary and comments ---------------------------------------------------------------


def test_next_boundary_keeps_what_was_seen_while_the_mark_stands_still() -> None:
    known = Boundary(W, frozenset({1}))
    assert next_boundary(known, W, W, [2]) == Boundary(W, frozenset({1, 2}))
    assert next_boundary(known, W, AFTER, [3]) == Boundary(AFTER, frozenset({3}))
    # Unknown before (a restart): what this listing showed at the mark is now considered.
    assert next_boundary(None, W, W, [2]) == Boundary(W, frozenset({2}))
    assert next_boundary(Boundary(BEFORE, frozenset({9})), W, W, []) == Boundary(W)


@pytest.mark.parametrize(("created", "updated", "boundary", "expected"), [
    (AFTER, AFTER, None, CommentSighting.CREATED),            # new since the mark
    (BEFORE, AFTER, None, CommentSighting.EDITED),            # old, back because edited
    (BEFORE, BEFORE, None, CommentSighting.SKIP),             # older than the mark
    (W, W, None, CommentSighting.SKIP),                       # at the mark, unknown: seen
    (W, W, Boundary(W, frozenset({("issue", 1)})), CommentSighting.SKIP),
    (W, W, Boundary(W, frozenset({("issue", 2)})), CommentSighting.CREATED),  # same second
    (BEFORE, W, Boundary(W), CommentSighting.EDITED),          # edited in the mark's second
    (W, AFTER, None, CommentSighting.EDITED),                  # unknown: never replay
    (W, AFTER, Boundary(W, frozenset({("issue", 1)})), CommentSighting.EDITED),
    (W, AFTER, Boundary(W), CommentSighting.CREATED),          # created after that poll
    (W, AFTER, Boundary(BEFORE), CommentSighting.EDITED),      # a stale boundary is unknown
])
def test_comment_sightings(created: datetime, updated: datetime, boundary: Boundary | None,
                           expected: CommentSighting) -> None:
    assert comment_sighting(("issue", 1), created, updated, W, boundary) is expected


# -- pull requests ------------------------------------------------------------------------------


@pytest.mark.parametrize(("current", "previous", "history", "boundary", "action"), [
    # at the watermark's own second
    (pr(updated=W), None, NONE, None, PullAction.SKIP),
    (pr(updated=W), pr(updated=W), NONE, Boundary(W), PullAction.SKIP),
    (pr(updated=W, created=W), None, NONE, Boundary(W), PullAction.REVIEW),
    (pr(updated=W), pr(updated=W, draft=True), NONE, Boundary(W), PullAction.REVIEW),
    # closed
    (pr(state="closed", closed=AFTER), None, NONE, None, PullAction.CLOSE),
    (pr(state="closed", closed=BEFORE), None, NONE, None, PullAction.SKIP),
    (pr(state="closed", closed=W), pr(state="closed", closed=W, updated=W), NONE, None,
     PullAction.SKIP),
    # drafts go to the trigger rules, which ignore them
    (pr(draft=True), None, NONE, None, PullAction.REVIEW),
    # seen before by this process
    (pr(), pr(state="closed", closed=W), NONE, None, PullAction.REVIEW),
    (pr(), pr(draft=True), NONE, None, PullAction.REVIEW),
    (pr(head=B), pr(head=A), NONE, None, PullAction.PUSH),
    (pr(), pr(), NONE, None, PullAction.SKIP),
    (pr(), pr(), PullHistory(frozenset({A}), reopened=True), None, PullAction.REVIEW),
    # never seen by this process
    (pr(created=AFTER), None, NONE, None, PullAction.REVIEW),
    (pr(), None, PullHistory(frozenset({A}), reopened=True), None, PullAction.REVIEW),
    (pr(), None, PullHistory(frozenset({A}), reopened=False), None, PullAction.SKIP),
    (pr(head=B), None, PullHistory(frozenset({A}), reopened=False), None, PullAction.PUSH),
    # a first sighting (after a restart) with no head queued before: a comment, a bot's
    # update or a push look alike, and a restart may not spend allowance
    (pr(), None, NONE, None, PullAction.SKIP),
])
def test_pull_actions(current: PullRequest, previous: PullRequest | None, history: PullHistory,
                      boundary: Boundary | None, action: PullAction) -> None:
    assert pull_action(current, previous, history, W, boundary).action is action


def test_pull_memory_forgets_the_least_recently_seen_first() -> None:
    memory = PullMemory(max_entries=2)
    memory.remember("o/r", pr(number=1))
    memory.remember("o/r", pr(number=2))
    memory.remember("o/r", pr(number=1, head=B))  # seen again: most recent
    memory.remember("o/r", pr(number=3))
    assert memory.get("o/r", 2) is None
    assert memory.get("o/r", 1) == pr(number=1, head=B)
    assert memory.get("x/y", 1) is None
    assert len(memory) == 2
    with pytest.raises(ValueError):
        PullMemory(max_entries=0)


def test_parse_comment_needs_an_id_and_both_times() -> None:
    obj = {"id": 7, "created_at": "2026-03-02T08:59:00Z", "updated_at": "2026-03-02T09:00:00Z"}
    item = parse_comment(obj, "review")
    assert (item.key, item.created_at, item.updated_at) == (("review", 7),
                                                           W - timedelta(minutes=1), W)
    for broken in ({**obj, "id": "7"}, {**obj, "id": False}, {**obj, "created_at": None},
                   "not an object"):
        with pytest.raises(PayloadError):
            parse_comment(broken, "issue")
