"""The simulator's pull-request content: diffs and their limits, files, reviews anchored
to hunks, comments with since/sort/direction, and reactions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.simulator import Settings
from tests.simulator.diffs import parse_diff
from tests.simulator.harness import REPO, SAMPLE_DIFF, Harness, auth
from tests.simulator.reviews import LINE_UNRESOLVED, ONE_PENDING, PATH_UNRESOLVED
from tests.simulator_fixtures import harness_sim, harness_token

__all__ = ["harness_sim", "harness_token"]  # the fixtures

REVIEWS = f"/repos/{REPO}/pulls/1/reviews"





def comment(path: str = "src/app.py", line: int = 3, **extra: Any) -> dict[str, Any]:
    return {"path": path, "line": line, "body": "note", **extra}


# -- diff parsing ----------------------------------------------------------------------------
def test_parse_diff_sides_positions_and_statuses() -> None:
    files = {f.path: f for f in parse_diff(SAMPLE_DIFF)}
    app = files["src/app.py"]
    assert (app.status, app.additions, app.deletions) == ("modified", 3, 2)
    assert app.hunk_at("RIGHT", 3) is not None and app.hunk_at("LEFT", 2) is not None
    assert app.hunk_at("RIGHT", 10) is None and app.hunk_at("LEFT", 7) is None
    assert app.hunk_at("RIGHT", 1) is not app.hunk_at("RIGHT", 22)
    assert app.position_target(2) == ("LEFT", 2)
    assert app.position_target(9) is None  # the second hunk's header
    assert app.head_blob is not None and app.head_blob.endswith("bb")
    assert files["README.md"].status == "added"


def test_parse_diff_handles_tricky_lines() -> None:
    diff = (
        "diff --git a/x.sql b/x.sql\n--- a/x.sql\n+++ b/x.sql\n"
        "@@ -1,2 +1,1 @@\n--- a comment that starts like a header\n keep\n"
        "\\ No newline at end of file\n"
        "diff --git a/old.txt b/new.txt\nsimilarity index 90%\nrename from old.txt\n"
        "rename to new.txt\n"
        "diff --git a/img.png b/img.png\nindex 1..2 100644\n"
        "Binary files a/img.png and b/img.png differ\n"
        "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n"
        "+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
    )
    files = {f.path: f for f in parse_diff(diff)}
    assert set(files) == {"x.sql", "new.txt", "img.png", "gone.txt"}
    assert files["x.sql"].deletions == 1 and files["x.sql"].hunk_at("RIGHT", 1) is not None
    assert files["new.txt"].status == "renamed" and files["new.txt"].old_path == "old.txt"
    assert files["img.png"].binary and files["img.png"].patch is None
    assert files["gone.txt"].status == "removed" and files["gone.txt"].hunk_at("LEFT", 1)


# -- pull request diff and files ------------------------------------------------------------------
@pytest.mark.anyio
async def test_diff_media_type_serves_the_diff(sim: Harness, token: str) -> None:
    response = await sim.client.get(f"/repos/{REPO}/pulls/1", headers={
        **auth(token), "Accept": "application/vnd.github.diff"})
    assert response.status_code == 200
    assert response.text == SAMPLE_DIFF
    full = (await sim.client.get(f"/repos/{REPO}/pulls/1", headers=auth(token))).json()
    assert (full["additions"], full["deletions"], full["changed_files"]) == (5, 2, 2)
    assert full["head"]["sha"] == "b" * 40 and full["base"]["sha"] == "a" * 40
    assert full["user"] == {**full["user"], "login": "alice", "type": "User"}
    assert full["merged"] is False and full["draft"] is False


@pytest.mark.anyio
@pytest.mark.parametrize(("settings", "what"), [
    (Settings(max_diff_files=1), "files (1)"),
    (Settings(max_diff_lines=10), "lines (10)"),
])
async def test_diff_too_large_is_406_but_files_still_list(settings: Settings, what: str) -> None:
    harness = Harness.create(settings=settings)
    async with harness.client:
        token = await harness.mint_token()
        response = await harness.client.get(f"/repos/{REPO}/pulls/1", headers={
            **auth(token), "Accept": "application/vnd.github.v3.diff"})
        assert response.status_code == 406
        body = response.json()
        assert body["errors"] == [{"resource": "PullRequest", "field": "diff",
                                   "code": "too_large"}]
        assert f"maximum number of {what}" in body["message"]
        files = await harness.client.get(f"/repos/{REPO}/pulls/1/files", headers=auth(token))
        assert files.status_code == 200
        assert [f["filename"] for f in files.json()] == ["src/app.py", "README.md"]


@pytest.mark.anyio
async def test_files_are_paginated_capped_and_patch_omitted_when_huge() -> None:
    sections = [f"diff --git a/f{i}.txt b/f{i}.txt\nnew file mode 100644\n--- /dev/null\n"
                f"+++ b/f{i}.txt\n@@ -0,0 +1 @@\n+{'x' * (200 if i == 0 else 1)}\n"
                for i in range(7)]
    harness = Harness.create(settings=Settings(max_files_listed=5, max_patch_bytes=100),
                             diff="".join(sections))
    async with harness.client:
        token = await harness.mint_token()
        first = await harness.client.get(f"/repos/{REPO}/pulls/1/files",
                                         params={"per_page": 3}, headers=auth(token))
        assert "page=2" in first.links["last"]["url"]
        rest = await harness.client.get(first.links["next"]["url"], headers=auth(token))
        names = [f["filename"] for f in first.json() + rest.json()]
        assert names == [f"f{i}.txt" for i in range(5)]
        assert "patch" not in first.json()[0] and first.json()[1]["patch"] == "@@ -0,0 +1 @@\n+x"


@pytest.mark.anyio
async def test_patch_title_and_body(sim: Harness, token: str) -> None:
    response = await sim.client.patch(f"/repos/{REPO}/pulls/1", headers=auth(token),
                                      json={"title": "Better title", "body": "details"})
    assert response.status_code == 200
    assert (response.json()["title"], response.json()["body"]) == ("Better title", "details")
    edited = sim.world.events[-1]
    assert (edited.event, edited.action) == ("pull_request", "edited")
    assert edited.payload["changes"]["title"] == {"from": "Add logging"}
    assert edited.payload["sender"]["type"] == "Bot"


# -- reviews ---------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_review_with_anchored_comments_is_created(sim: Harness, token: str) -> None:
    response = await sim.client.post(REVIEWS, headers=auth(token), json={
        "event": "COMMENT", "body": "Looks fine", "commit_id": "b" * 40,
        "comments": [comment(line=3), comment(line=2, side="LEFT"),
                     comment(line=4, start_line=2), comment(path="README.md", line=1)]})
    assert response.status_code == 200
    review = response.json()
    assert review["state"] == "COMMENTED" and review["commit_id"] == "b" * 40
    assert review["user"]["login"] == "pr-reviewer[bot]" and "submitted_at" in review
    listed = await sim.client.get(f"/repos/{REPO}/pulls/1/comments", headers=auth(token))
    rows = [(c["path"], c["line"], c["side"], c["start_line"]) for c in listed.json()]
    assert rows == [("src/app.py", 3, "RIGHT", None), ("src/app.py", 2, "LEFT", None),
                    ("src/app.py", 4, "RIGHT", 2), ("README.md", 1, "RIGHT", None)]
    assert listed.json()[0]["diff_hunk"].endswith("+import json\n+import logging")
    assert all(c["pull_request_review_id"] == review["id"] for c in listed.json())
    kinds = [(e.event, e.action) for e in sim.world.events]
    assert kinds == [("pull_request_review", "submitted")] + [
        ("pull_request_review_comment", "created")] * 4


@pytest.mark.anyio
@pytest.mark.parametrize(("bad", "message"), [
    (comment(line=12), LINE_UNRESOLVED),                  # between the two hunks
    (comment(line=7, side="LEFT"), LINE_UNRESOLVED),       # old line 7 is not shown
    (comment(path="docs/missing.md"), PATH_UNRESOLVED),
    (comment(line=22, start_line=3), "same hunk"),          # spans two hunks
    (comment(line=3, start_line=3), "precede"),
])
async def test_one_bad_anchor_fails_the_whole_review(sim: Harness, token: str,
                                                     bad: dict[str, Any], message: str) -> None:
    response = await sim.client.post(REVIEWS, headers=auth(token), json={
        "event": "COMMENT", "body": "x", "comments": [comment(line=3), bad]})
    assert response.status_code == 422
    body = response.json()
    assert body["message"] == "Unprocessable Entity"
    assert len(body["errors"]) == 1 and message in body["errors"][0]
    assert sim.world.reviews == {} and sim.world.review_comments == {}
    assert sim.world.events == []


@pytest.mark.anyio
async def test_comment_on_an_older_commit_uses_that_commits_diff(sim: Harness,
                                                                 token: str) -> None:
    sim.world.push(REPO, 1, head_sha="c" * 40, diff=(
        "diff --git a/other.py b/other.py\n--- a/other.py\n+++ b/other.py\n"
        "@@ -1 +1 @@\n-a\n+b\n"))
    old = await sim.client.post(REVIEWS, headers=auth(token), json={
        "event": "COMMENT", "body": "x", "commit_id": "b" * 40, "comments": [comment()]})
    assert old.status_code == 200
    new = await sim.client.post(REVIEWS, headers=auth(token), json={
        "event": "COMMENT", "body": "x", "comments": [comment()]})
    assert new.status_code == 422 and new.json()["errors"] == [PATH_UNRESOLVED]
    unknown = await sim.client.post(REVIEWS, headers=auth(token), json={
        "event": "COMMENT", "body": "x", "commit_id": "f" * 40})
    assert unknown.status_code == 422


@pytest.mark.anyio
async def test_one_pending_review_per_user(sim: Harness, token: str) -> None:
    pending = await sim.client.post(REVIEWS, headers=auth(token),
                                    json={"body": "draft", "comments": [comment()]})
    assert pending.status_code == 200
    assert pending.json()["state"] == "PENDING" and "submitted_at" not in pending.json()
    for attempt in ({"body": "again"}, {"event": "COMMENT", "body": "now"}):
        second = await sim.client.post(REVIEWS, headers=auth(token), json=attempt)
        assert second.status_code == 422
        assert second.json()["errors"] == [ONE_PENDING]
    hidden = await sim.client.get(f"/repos/{REPO}/pulls/1/comments", headers=auth(token))
    assert hidden.json() == []
    listed = await sim.client.get(REVIEWS, headers=auth(token))
    assert [r["state"] for r in listed.json()] == ["PENDING"]
    review_id = pending.json()["id"]
    submitted = await sim.client.post(f"{REVIEWS}/{review_id}/events", headers=auth(token),
                                      json={"event": "COMMENT"})
    assert submitted.status_code == 200 and submitted.json()["state"] == "COMMENTED"
    assert (await sim.client.post(REVIEWS, headers=auth(token),
                                  json={"event": "COMMENT", "body": "ok"})).status_code == 200
    shown = await sim.client.get(f"/repos/{REPO}/pulls/1/comments", headers=auth(token))
    assert len(shown.json()) == 1


@pytest.mark.anyio
async def test_pending_review_can_be_deleted_and_others_pending_are_invisible(
        sim: Harness, token: str) -> None:
    human = sim.world.add_review(REPO, 1, user="carol", state="PENDING")
    mine = await sim.client.post(REVIEWS, headers=auth(token), json={"body": "draft"})
    listed = await sim.client.get(REVIEWS, headers=auth(token))
    assert [r["id"] for r in listed.json()] == [mine.json()["id"]]
    assert human.id not in [r["id"] for r in listed.json()]
    deleted = await sim.client.delete(f"{REVIEWS}/{mine.json()['id']}", headers=auth(token))
    assert deleted.status_code == 200
    assert (await sim.client.get(REVIEWS, headers=auth(token))).json() == []


@pytest.mark.anyio
async def test_reviews_are_paginated(sim: Harness, token: str) -> None:
    for index in range(5):
        sim.world.add_review(REPO, 1, user=f"user{index}", body=f"r{index}")
    page = await sim.client.get(REVIEWS, params={"per_page": 2, "page": 3},
                                headers=auth(token))
    assert [r["body"] for r in page.json()] == ["r4"]
    assert set(page.links) == {"prev", "first"}


@pytest.mark.anyio
async def test_request_changes_needs_a_body(sim: Harness, token: str) -> None:
    response = await sim.client.post(REVIEWS, headers=auth(token),
                                     json={"event": "REQUEST_CHANGES"})
    assert response.status_code == 422


# -- comments --------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_app_comment_is_authored_by_the_bot(sim: Harness, token: str) -> None:
    created = await sim.client.post(f"/repos/{REPO}/issues/1/comments", headers=auth(token),
                                    json={"body": "Reviewing…"})
    assert created.status_code == 201
    body = created.json()
    assert body["user"]["login"] == "pr-reviewer[bot]" and body["user"]["type"] == "Bot"
    assert body["performed_via_github_app"]["id"] == sim.app.id
    assert created.headers["location"].endswith(f"/issues/comments/{body['id']}")
    sim.world.clock.advance(10)
    edited = await sim.client.patch(f"/repos/{REPO}/issues/comments/{body['id']}",
                                    headers=auth(token), json={"body": "Done"})
    assert edited.json()["body"] == "Done"
    assert edited.json()["updated_at"] > body["updated_at"]
    assert [(e.event, e.action) for e in sim.world.events] == [
        ("issue_comment", "created"), ("issue_comment", "edited")]
    missing = await sim.client.post(f"/repos/{REPO}/issues/1/comments", headers=auth(token),
                                    json={})
    assert missing.status_code == 422
    nowhere = await sim.client.post(f"/repos/{REPO}/issues/99/comments", headers=auth(token),
                                    json={"body": "x"})
    assert nowhere.status_code == 404


@pytest.mark.anyio
async def test_issue_comment_listing_since_sort_direction(sim: Harness, token: str) -> None:
    world = sim.world
    world.add_issue(REPO, number=2, title="bug", user="dave")
    first = world.add_issue_comment(REPO, 1, user="alice", body="one")
    world.clock.advance(60)
    second = world.add_issue_comment(REPO, 2, user="bob", body="two")
    world.clock.advance(60)
    mark = world.now()
    world.clock.advance(60)
    world.edit_issue_comment(first, "one, edited")
    url = f"/repos/{REPO}/issues/comments"

    async def ids(**params: str) -> list[int]:
        response = await sim.client.get(url, params=params, headers=auth(token))
        assert response.status_code == 200
        return [c["id"] for c in response.json()]

    assert await ids() == [first.id, second.id]
    assert await ids(direction="desc") == [first.id, second.id]  # ignored without sort
    assert await ids(sort="created") == [second.id, first.id]
    assert await ids(sort="updated", direction="asc") == [second.id, first.id]
    assert await ids(since=mark.strftime("%Y-%m-%dT%H:%M:%SZ")) == [first.id]
    on_issue = await sim.client.get(f"/repos/{REPO}/issues/2/comments", headers=auth(token))
    assert [c["id"] for c in on_issue.json()] == [second.id]
    bad = await sim.client.get(url, params={"since": "yesterday"}, headers=auth(token))
    assert bad.status_code == 422


@pytest.mark.anyio
async def test_review_comment_listing_since_and_sort(sim: Harness, token: str) -> None:
    world = sim.world
    older = world.add_review_comment(REPO, 1, user="carol", body="a", path="src/app.py", line=3)
    world.clock.advance(120)
    newer = world.add_review_comment(REPO, 1, user="carol", body="b", path="README.md", line=1)
    url = f"/repos/{REPO}/pulls/comments"
    listed = await sim.client.get(url, params={"sort": "created", "direction": "desc"},
                                  headers=auth(token))
    assert [c["id"] for c in listed.json()] == [newer.id, older.id]
    since = newer.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    recent = await sim.client.get(url, params={"since": since}, headers=auth(token))
    assert [c["id"] for c in recent.json()] == [newer.id]
    single = await sim.client.get(f"{url}/{older.id}", headers=auth(token))
    assert single.json()["body"] == "a" and "last-modified" in single.headers


# -- reactions -------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_reactions_201_then_200(sim: Harness, token: str) -> None:
    target = sim.world.add_issue_comment(REPO, 1, user="alice", body="/review")
    url = f"/repos/{REPO}/issues/comments/{target.id}/reactions"
    first = await sim.client.post(url, headers=auth(token), json={"content": "eyes"})
    again = await sim.client.post(url, headers=auth(token), json={"content": "eyes"})
    other = await sim.client.post(url, headers=auth(token), json={"content": "rocket"})
    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 201)
    assert first.json()["id"] == again.json()["id"]
    bad = await sim.client.post(url, headers=auth(token), json={"content": "thumbsup"})
    assert bad.status_code == 422
    fetched = await sim.client.get(f"/repos/{REPO}/issues/comments/{target.id}",
                                   headers=auth(token))
    assert fetched.json()["reactions"]["eyes"] == 1
    assert fetched.json()["reactions"]["total_count"] == 2
    on_pr = await sim.client.post(f"/repos/{REPO}/issues/1/reactions", headers=auth(token),
                                  json={"content": "+1"})
    assert on_pr.status_code == 201
    diff_comment = sim.world.add_review_comment(REPO, 1, user="bob", body="?",
                                                path="src/app.py", line=3)
    on_diff = await sim.client.post(f"/repos/{REPO}/pulls/comments/{diff_comment.id}/reactions",
                                    headers=auth(token), json={"content": "heart"})
    assert on_diff.status_code == 201


@pytest.mark.anyio
async def test_pr_comment_reaction_needs_pull_requests_write(sim: Harness) -> None:
    target = sim.world.add_issue_comment(REPO, 1, user="alice", body="hi")
    issues_only = await sim.mint_token({"permissions": {"issues": "write",
                                                        "pull_requests": "read"}})
    response = await sim.client.post(f"/repos/{REPO}/issues/comments/{target.id}/reactions",
                                     headers=auth(issues_only), json={"content": "eyes"})
    assert response.status_code == 403
    assert response.headers["x-accepted-github-permissions"] == "pull_requests=write"
