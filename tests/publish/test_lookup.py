"""The GitHub reads the publisher shares: the App's earlier post found by its marker (a
stale pending review deleted on the way), who asked, the diff a review anchors to (from
the files when GitHub will not serve it whole), and a review's inline comment ids."""

from __future__ import annotations

import httpx
import pytest

from service.publish.lookup import fetch_asker, find_post, read_diff, review_comment_ids
from tests.github.client_kit import FakeClock, FakeSleep, Script, clock, err, make_client, ok, sleep

__all__ = ["clock", "sleep"]  # fixtures

BOT = "pr-reviewer[bot]"
MARK = "<!-- pr-review-agent:k -->"


def _bot(id_: int, body: str, state: str = "COMMENTED") -> dict[str, object]:
    return {"id": id_, "body": body, "state": state, "user": {"login": BOT, "type": "Bot"}}


@pytest.mark.anyio
async def test_the_apps_post_is_found_by_its_marker_and_a_pending_review_deleted(
        clock: FakeClock, sleep: FakeSleep) -> None:
    def github(request: httpx.Request) -> httpx.Response:
        if request.method == "DELETE":
            return httpx.Response(200, json={})
        if request.url.path.endswith("/reviews"):
            return ok([_bot(1, "draft", state="PENDING"), _bot(2, "no marker")])
        return ok([_bot(3, f"{MARK}\nthe summary")])
    script = Script(clock, github)
    client = make_client(script, clock, sleep)
    found = await find_post(client, 7, "acme/widgets", 5, MARK, bot_login=BOT)
    assert found is not None and (found.id, found.where) == (3, "comment")
    assert [(r.method, r.url.path) for r in script.requests] == [
        ("GET", "/repos/acme/widgets/pulls/5/reviews"),
        ("DELETE", "/repos/acme/widgets/pulls/5/reviews/1"),
        ("GET", "/repos/acme/widgets/issues/5/comments")]
    assert await find_post(client, 7, "acme/widgets", 5, "<!-- other -->", bot_login=BOT,
                           reviews=False) is None


@pytest.mark.anyio
async def test_who_asked_and_where(clock: FakeClock, sleep: FakeSleep) -> None:
    script = Script(
        clock,
        ok({"user": {"login": "alice"}, "html_url": "https://github.com/o/r/pull/5#c-9"}),
        ok({"user": {"login": "bad login!"}, "html_url": "x"}),
        err(404, "Not Found"))
    client = make_client(script, clock, sleep)
    asker = await fetch_asker(client, 7, "o/r", 9, "review")
    assert asker is not None
    assert (asker.login, asker.url) == ("alice", "https://github.com/o/r/pull/5#c-9")
    assert script.requests[0].url.path == "/repos/o/r/pulls/comments/9"
    assert await fetch_asker(client, 7, "o/r", 10, "issue") is None  # not a login
    assert await fetch_asker(client, 7, "o/r", 11, "issue") is None  # the comment is gone
    assert await fetch_asker(client, 7, "o/r", None, None) is None  # nobody asked


@pytest.mark.anyio
async def test_a_diff_too_large_to_serve_is_put_back_together_from_the_files(
        clock: FakeClock, sleep: FakeSleep) -> None:
    too_large = httpx.Response(406, json={
        "message": "Sorry, the diff exceeded the maximum number of lines (20000)",
        "errors": [{"resource": "PullRequest", "field": "diff", "code": "too_large"}]})
    files = ok([{"filename": "a.py", "patch": "@@ -1 +1 @@\n-x\n+y"},
                {"filename": "logo.png"}])  # binary: no patch, no hunks
    script = Script(clock, too_large, files)
    diff = await read_diff(make_client(script, clock, sleep), 7, "o/r", 5)
    assert diff == "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"


@pytest.mark.anyio
async def test_a_reviews_inline_comments_and_none_when_they_cannot_be_listed(
        clock: FakeClock, sleep: FakeSleep) -> None:
    listed = ok([{"id": 1, "pull_request_review_id": 77}, {"id": 2, "pull_request_review_id": 78},
                 {"id": 3, "pull_request_review_id": 77}])
    script = Script(clock, listed, err(403, "Resource not accessible by integration"))
    client = make_client(script, clock, sleep)
    assert await review_comment_ids(client, 7, "o/r", 5, 77) == (1, 3)
    assert await review_comment_ids(client, 7, "o/r", 5, 77) == ()
