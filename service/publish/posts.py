"""What one publication attempt posts, by kind: found already posted (by its marker), a
failed run's reply, an outdated result, a description, an answer, a review. Each records its outcome
through the publisher's ``Record`` (github.py owns the attempt: its lease, its retries)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio

from service.config.posting import AskConfig, PublishConfig
from service.config.repository.merge import Effective
from service.engine.base import Finding
from service.engine.hunks import split_findings
from service.github.client import GitHubClient
from service.github.errors import NotFound, Unprocessable
from service.github.pulls import PullRequest
from service.publish import answers, compose, lookup
from service.publish.markers import OUTDATED, has_marker, run_marker, with_description_block
from service.publish.publication import Publication
from service.publish.safety import MAX_BODY, github_length
from service.storage import runs
from service.storage.database import Database

log = logging.getLogger(__name__)

Status = Literal["published", "superseded", "dry_run", "refused", "failed", "retry", "skipped"]


@dataclass(frozen=True)
class PublishResult:
    """How one attempt ended. ``existing`` is True when an earlier attempt's post was
    found by its marker and recorded instead of posting again."""

    dedupe_key: str
    status: Status
    comment_id: int | None = None
    existing: bool = False


class Permanent(Exception):
    """GitHub refused the publication for good (or the stored run cannot be posted)."""


class Record(Protocol):
    """Record an attempt's outcome, with what it posted (``GitHubPublisher._record``)."""

    async def __call__(self, pub: Publication, outcome: Status, *, published: bool,
                       comment_id: int | None, posted: Iterable[int] = (),
                       inline: Sequence[Finding] = (), new_head: str | None = None) -> None:
        ...


class Posts:
    """The kinds of post, on the pull request the attempt has read."""

    def __init__(self, *, store: Database, github: GitHubClient, record: Record,
                 config: Callable[[], PublishConfig], mention: str,
                 bot_login: Callable[[], str | None],
                 repo_config: Callable[[str], Effective],
                 ask: Callable[[], AskConfig] = AskConfig) -> None:
        self._store = store
        self._github = github
        self._record = record
        self._config = config
        self._phrase = mention
        self._bot_login = bot_login
        self._repo_config = repo_config
        self._ask = ask

    async def existing(self, installation: int, pub: Publication,
                        pull: PullRequest) -> PublishResult | None:
        marker = run_marker(pub.dedupe_key)
        if pub.is_describe and has_marker(pull.body, marker):
            await self._record(pub, self._found_outcome(pub, pull.body), published=True,
                               comment_id=None)
            return PublishResult(pub.dedupe_key, "published", existing=True)
        found = await lookup.find_post(
            self._github, installation, pub.repo, pub.pr_number, marker,
            bot_login=self._bot_login(),
            review_comments=pub.answer is not None and pub.answer.reply_to is not None)
        if found is None:
            return None
        posted: tuple[int, ...] = (found.id,)
        if found.where == "review":
            posted = await lookup.review_comment_ids(self._github, installation, pub.repo,
                                                     pub.pr_number, found.id)
        outcome = self._found_outcome(pub, found.body)
        await self._record(pub, outcome, published=True, comment_id=found.id, posted=posted)
        return PublishResult(pub.dedupe_key, outcome, comment_id=found.id, existing=True)

    @staticmethod
    def _found_outcome(pub: Publication, body: str) -> Status:
        if pub.outcome == "failed":
            return "refused"
        return "superseded" if has_marker(body, OUTDATED) else "published"

    async def refused(self, installation: int, pub: Publication,
                       extra: dict[str, object]) -> PublishResult:
        asker = await lookup.fetch_asker(self._github, installation, pub.repo,
                                         pub.comment_id, pub.comment_source)
        comment_id = await self._comment(
            installation, pub, compose.failure_comment(pub, asker, phrase=self._phrase))
        await self._record(pub, "refused", published=True, comment_id=comment_id,
                           posted=(comment_id,))
        log.info("the run failed; told the person who asked", extra=extra)
        return PublishResult(pub.dedupe_key, "refused", comment_id=comment_id)

    async def superseded(self, installation: int, pub: Publication, pull: PullRequest,
                          extra: dict[str, object]) -> PublishResult:
        extra = {**extra, "head": pull.head_sha, "reviewed": pub.head_sha}
        if not pub.is_mention:
            await self._record(pub, "superseded", published=False, comment_id=None,
                               new_head=pull.head_sha)
            log.info("superseded: the head moved on; nothing posted", extra=extra)
            return PublishResult(pub.dedupe_key, "superseded")
        comment_id = await self._comment(
            installation, pub, compose.outdated_comment(pub, pull.head_sha, phrase=self._phrase))
        await self._record(pub, "superseded", published=True, comment_id=comment_id,
                           posted=(comment_id,))
        log.info("superseded: posted as an outdated comment", extra=extra)
        return PublishResult(pub.dedupe_key, "superseded", comment_id=comment_id)

    async def describe(self, installation: int, pub: Publication, pull: PullRequest,
                        extra: dict[str, object]) -> PublishResult:
        if self._config().describe_updates_body:
            block = compose.description_block(pub, phrase=self._phrase,
                                              limit=MAX_BODY // 2)
            body = with_description_block(pull.body, block)
            if github_length(body) <= MAX_BODY:
                await self._github.patch_json(
                    installation, f"/repos/{pub.repo}/pulls/{pub.pr_number}", {"body": body})
                await self._record(pub, "published", published=True, comment_id=None)
                log.info("description written into the pull request body", extra=extra)
                return PublishResult(pub.dedupe_key, "published")
            log.warning("the pull request body has no room for the description; posting "
                        "it as a comment", extra=extra)
        comment_id = await self._comment(
            installation, pub, compose.description_comment(pub, phrase=self._phrase))
        await self._record(pub, "published", published=True, comment_id=comment_id,
                           posted=(comment_id,))
        log.info("description posted", extra={**extra, "comment_id": comment_id})
        return PublishResult(pub.dedupe_key, "published", comment_id=comment_id)

    async def answer(self, installation: int, pub: Publication, pull: PullRequest,
                     extra: dict[str, object]) -> PublishResult:
        """An answer to a question, where it was asked: in its review thread, or in the
        conversation. Posted even when the head has moved on (it says so): a question
        is not a verdict on the current code."""
        answer = pub.answer
        if answer is None or answer.text is None:  # nothing to say but why
            return await self.refused(installation, pub, extra)
        asker = await lookup.fetch_asker(self._github, installation, pub.repo,
                                         pub.comment_id, pub.comment_source)
        comment_id = await self._comment(installation, pub, answers.answer_comment(
            pub, pull.head_sha, phrase=self._phrase, asker=asker,
            max_chars=self._ask().max_answer_chars))
        await self._record(pub, "published", published=True, comment_id=comment_id,
                           posted=(comment_id,))
        log.info("answer posted", extra={**extra, "comment_id": comment_id,
                                         "in_thread": answer.reply_to is not None})
        return PublishResult(pub.dedupe_key, "published", comment_id=comment_id)

    async def review(self, installation: int, pub: Publication,
                      extra: dict[str, object], anchors: str | None = None
                      ) -> PublishResult:
        path = f"/repos/{pub.repo}/pulls/{pub.pr_number}/reviews"
        inline: tuple[Finding, ...] = ()
        body_only = pub.findings
        if pub.findings:
            diff = anchors if anchors is not None else await lookup.read_diff(
                self._github, installation, pub.repo, pub.pr_number)
            inline, body_only = split_findings(pub.findings, diff)
        notes: tuple[str, ...] = ()
        if pub.is_mention:  # a person asked: the answer names what is wrong with the file
            notes = (await anyio.to_thread.run_sync(self._repo_config, pub.repo)).notes
        post = compose.review(pub, inline, body_only, phrase=self._phrase, config_notes=notes)
        post_inline = inline
        try:
            data = await self._github.post_json(installation, path, post.payload(pub.head_sha))
        except Unprocessable as exc:
            if not post.comments:
                raise
            log.warning("GitHub refused an inline anchor (%s); posting once more with every "
                        "finding in the body", exc.message, extra=extra)
            await self._store.write_async(runs.count_attempt, pub.dedupe_key)
            post = compose.review(pub, (), pub.findings, phrase=self._phrase, fallback=True,
                                  config_notes=notes)
            post_inline = ()
            data = await self._github.post_json(installation, path, post.payload(pub.head_sha))
        review_id = id_of(data)
        posted: tuple[int, ...] = ()
        if post.comments:
            posted = await lookup.review_comment_ids(self._github, installation, pub.repo,
                                                     pub.pr_number, review_id)
        await self._record(pub, "published", published=True, comment_id=review_id,
                           posted=posted, inline=post_inline)
        log.info("review posted", extra={**extra, "review_id": review_id,
                                         "inline": len(post.comments),
                                         "in_body": len(pub.findings) - len(post.comments)})
        return PublishResult(pub.dedupe_key, "published", comment_id=review_id)

    async def _comment(self, installation: int, pub: Publication, body: str) -> int:
        """A comment on the pull request; a reply in the question's review thread when it
        was asked in one (in the conversation when that thread is gone)."""
        thread = None if pub.answer is None else pub.answer.reply_to
        if thread is not None:
            try:
                data = await self._github.post_json(
                    installation,
                    f"/repos/{pub.repo}/pulls/{pub.pr_number}/comments/{thread}/replies",
                    {"body": body})
                return id_of(data)
            except NotFound:
                log.warning("the question's review thread is gone; answering in the "
                            "conversation", extra={"dedupe_key": pub.dedupe_key,
                                                   "repo": pub.repo, "pr": pub.pr_number})
        data = await self._github.post_json(
            installation, f"/repos/{pub.repo}/issues/{pub.pr_number}/comments", {"body": body})
        return id_of(data)


def id_of(data: object) -> int:
    """The ``id`` of what GitHub created; an answer without one cannot be recorded."""
    value = data.get("id") if isinstance(data, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise Permanent("GitHub's answer has no id")
    return value
