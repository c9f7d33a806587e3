"""The GitHub reads the publisher and the notices share: finding the App's own earlier
post by its marker, who asked, the diff a review is anchored to, and the ids of a review's
inline comments."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from service.github.client import GitHubClient
from service.github.errors import GitHubError, NotAcceptable, NotFound
from service.publish.compose import Asker
from service.publish.markers import find_marked

log = logging.getLogger(__name__)

_LOGIN: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_URL: Final = re.compile(r"https?://[^\s()<>\[\]]+")


@dataclass(frozen=True)
class Found:
    """An earlier post of the App's that carries a marker."""

    id: int
    where: str   # "review", "comment" or "reply" (in a review thread)
    body: str


async def _all(github: GitHubClient, installation: int, path: str) -> list[Mapping[str, Any]]:
    return [item async for item in github.paginate(installation, path)
            if isinstance(item, Mapping)]


async def find_post(github: GitHubClient, installation: int, repo: str, pr_number: int,
                    marker: str, *, bot_login: str | None, reviews: bool = True,
                    comments: bool = True, review_comments: bool = False) -> Found | None:
    """The App's review or conversation comment on the pull request that carries
    ``marker`` (every page is read), or None; with ``review_comments``, its replies in
    review threads too (where an answer to a question asked in a thread goes).

    A PENDING review of the App's (only its author can see one) is deleted on the way:
    nothing the publisher does leaves one, and GitHub refuses a new review while it
    exists.
    """
    if reviews:
        listed = await _all(github, installation, f"/repos/{repo}/pulls/{pr_number}/reviews")
        for review in listed:
            if review.get("state") == "PENDING" and isinstance(review.get("id"), int):
                log.warning("deleting a stale pending review of the App's", extra={
                    "repo": repo, "pr": pr_number, "review_id": review["id"]})
                await github.delete(
                    installation, f"/repos/{repo}/pulls/{pr_number}/reviews/{review['id']}")
        found = find_marked(listed, marker, bot_login)
        if found is not None:
            return Found(id=int(found["id"]), where="review", body=str(found.get("body")))
    if comments:
        listed = await _all(github, installation, f"/repos/{repo}/issues/{pr_number}/comments")
        found = find_marked(listed, marker, bot_login)
        if found is not None:
            return Found(id=int(found["id"]), where="comment", body=str(found.get("body")))
    if review_comments:
        listed = await _all(github, installation, f"/repos/{repo}/pulls/{pr_number}/comments")
        found = find_marked(listed, marker, bot_login)
        if found is not None:
            return Found(id=int(found["id"]), where="reply", body=str(found.get("body")))
    return None


async def fetch_asker(github: GitHubClient, installation: int, repo: str,
                      comment_id: int | None, comment_source: str | None) -> Asker | None:
    """Who wrote the mention, and where (None when unknown, or the comment is gone)."""
    if comment_id is None:
        return None
    kind = "pulls" if comment_source == "review" else "issues"
    try:
        data = await github.get_json(installation, f"/repos/{repo}/{kind}/comments/{comment_id}")
    except NotFound:
        return None
    user = data.get("user") if isinstance(data, Mapping) else None
    login = user.get("login") if isinstance(user, Mapping) else None
    if not isinstance(login, str) or not _LOGIN.fullmatch(login):
        return None
    url = data.get("html_url")
    return Asker(login=login, url=url if isinstance(url, str) and _URL.fullmatch(url) else None)


async def read_diff(github: GitHubClient, installation: int, repo: str, pr_number: int) -> str:
    """The pull request's diff as GitHub anchors review comments to it.

    The diff media type first; when GitHub will not serve it (406 ``too_large``), the
    per-file patches of ``GET /pulls/{n}/files`` put back together (a file without a patch
    — binary, or too large — then has no hunks, so its findings go in the body).
    """
    try:
        return await github.get_text(installation, f"/repos/{repo}/pulls/{pr_number}")
    except NotAcceptable as exc:
        if not exc.too_large:
            raise
    parts: list[str] = []
    async for item in github.paginate(installation, f"/repos/{repo}/pulls/{pr_number}/files"):
        name = item.get("filename") if isinstance(item, Mapping) else None
        patch = item.get("patch") if isinstance(item, Mapping) else None
        if isinstance(name, str) and isinstance(patch, str):
            parts.append(f"diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n"
                         f"{patch.rstrip(chr(10))}\n")
    return "".join(parts)


async def review_comment_ids(github: GitHubClient, installation: int, repo: str,
                             pr_number: int, review_id: int) -> tuple[int, ...]:
    """Ids of the inline comments of one review (empty when they cannot be listed: the
    ``[bot]`` login still marks them as the App's)."""
    try:
        listed = await _all(github, installation, f"/repos/{repo}/pulls/{pr_number}/comments")
    except GitHubError as exc:
        log.warning("could not list the review's inline comments: %s", exc, extra={
            "repo": repo, "pr": pr_number, "review_id": review_id})
        return ()
    return tuple(int(c["id"]) for c in listed
                 if c.get("pull_request_review_id") == review_id and isinstance(c.get("id"), int))
