"""``GitHubPublisher``: the worker's ``Publisher``, speaking on GitHub as the App.

``ack(claim)`` leaves the 👀 (``service.publish.acknowledge.GitHubAck``). ``publish(run)`` posts a
recorded run — always from its stored rows, so the first attempt and a retry after a crash
or a restart post exactly the same thing. One attempt (``publish_key``):

1. takes the run's publication lease and counts the attempt (``records.claim``); nothing
   to do when the run already has an outcome, a failure stamp, purged content, or a live
   lease held by another attempt;
2. ``publish.dry_run`` (read through a callable at every attempt, so a reload applies at
   once): record ``dry_run`` and stop — nothing is read from or written to GitHub;
3. re-reads the pull request and looks for the run's marker among the App's reviews and
   comments (and, for a description, in the pull request body): found means an earlier
   attempt posted and crashed before recording — record that post, post nothing;
4. a failed run: a mention gets a reply saying why (outcome ``refused``); an automatic
   review posts nothing (``refused``, nobody asked — decided before any GitHub call);
5. the head moved on since the run: ``superseded``. An automatic review posts nothing
   (the new head is a trigger of its own); a mention's result is posted as a plain
   comment marked outdated — never as a review of the current code;
6. a description: a comment, or the pull request body between marked lines when
   ``publish.describe_updates_body`` is on;
7. a review: ``POST /pulls/{n}/reviews`` with ``event: COMMENT`` pinned to the reviewed
   head; findings inside that head's diff hunks are inline comments, the rest go in the
   body; on 422 it posts once more with everything in the body.

GitHub refusing for good (403, 404, a 422 after the fallback) stamps
``publish_failed_at``; anything transient (rate limits past the client's waits, 5xx,
dropped connections) leaves the run for ``retry.republish_pending``, until
``MAX_ATTEMPTS`` attempts have been made.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

import anyio
import httpx

from service.budget.governor import Governor
from service.config.repository.merge import Effective
from service.config.schema import ChecksConfig, PublishConfig, ReviewConfig
from service.engine.base import Finding
from service.engine.findings import split_findings
from service.github.client import GitHubClient
from service.github.errors import Forbidden, GitHubError, NotFound, Unprocessable
from service.github.pulls import PullRequest, read_pull
from service.github.threads import GraphQLFailed, resolve_thread
from service.github.urls import web_url_for
from service.observe.metrics.instruments import Metrics
from service.publish import compose, lookup, memory, records
from service.publish.acknowledge import GitHubAck
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.checks.outcome import concluded
from service.publish.markers import OUTDATED, has_marker, run_marker, with_description_block
from service.publish.memory import without_repeats
from service.publish.notices import Notices
from service.publish.publication import Publication
from service.publish.run import RecordedRun
from service.publish.safety import MAX_BODY, github_length
from service.publish.summary import Summaries
from service.publish.thresholds import limits, thresholds
from service.runtime.alongside import alongside
from service.storage import posted_findings, runs, summaries
from service.storage.database import Database
from service.storage.queue import Claim

log = logging.getLogger(__name__)

#: How long a publication lease lasts unless renewed. It is renewed every third of that
#: while the attempt runs, so a holder that dies (SIGKILL right after recording) leaves
#: the run to whoever publishes next within half a minute, plus their next round.
PUBLISH_LEASE: Final = timedelta(seconds=30)
#: An attempt that runs longer than this is cut off (and retried later).
ATTEMPT_LIMIT: Final = timedelta(minutes=10)
#: Attempts after which a run that only ever met transient failures is given up on.
MAX_ATTEMPTS: Final = 10

Status = Literal["published", "superseded", "dry_run", "refused", "failed", "retry", "skipped"]


@dataclass(frozen=True)
class PublishResult:
    """How one attempt ended. ``existing`` is True when an earlier attempt's post was
    found by its marker and recorded instead of posting again."""

    dedupe_key: str
    status: Status
    comment_id: int | None = None
    existing: bool = False


class _Permanent(Exception):
    """GitHub refused the publication for good (or the stored run cannot be posted)."""


class GitHubPublisher:
    """Acknowledges claims and publishes recorded runs as the App (module docstring)."""

    def __init__(self, *, store: Database, github: GitHubClient,
                 installations: Callable[[str], Awaitable[int]],
                 clock: Callable[[], datetime], config: Callable[[], PublishConfig],
                 mention: str, bot_login: Callable[[], str | None] = lambda: None,
                 lease: timedelta = PUBLISH_LEASE,
                 checks: Callable[[], ChecksConfig] = ChecksConfig,
                 repo_config: Callable[[str], Effective] | None = None,
                 review: Callable[[], ReviewConfig] = ReviewConfig,
                 summary_comments: bool = False, metrics: Metrics | None = None) -> None:
        if lease < timedelta(seconds=3):
            raise ValueError("the publication lease must be at least three seconds")
        self._store = store
        self._github = github
        self._installations = installations
        self._clock = clock
        self._config = config
        self._metrics = metrics
        self._phrase = mention
        self._bot_login = bot_login
        self._lease = lease
        self._marks = CheckMarks(checks)
        self._checks = checks
        # The repository's config as last read (the worker read it afresh for this run):
        # its checks.fail_on, and its problems, named on the check run and in a reply.
        self._repo_config = repo_config or (lambda repo: Effective())
        self._review_config = review
        # The pull request's summary comment, asked for with every recorded outcome and
        # written after the attempt (None: not kept, as in the publisher's own tests).
        self.summaries = None if not summary_comments else Summaries(
            store=store, github=github, installations=installations, clock=clock,
            config=config, mention=mention, bot_login=bot_login)
        self._web_url = web_url_for(github.api_url)
        self._acker = GitHubAck(github, installations)
        self.notices = Notices(store=store, github=github, installations=installations,
                               config=config, mention=mention, bot_login=bot_login)

    # -- the worker's Publisher protocol ---------------------------------------------------

    async def ack(self, claim: Claim) -> None:
        """👀 on the mention's comment, or on the pull request for ``pr_opened``; nothing
        in a dry run. GitHub answers 200 for a reaction already there."""
        if self._config().dry_run:
            return
        await self._acker.ack(claim)

    async def publish(self, run: RecordedRun) -> None:
        """Publish a run the worker has just recorded (see ``publish_key``)."""
        await self.publish_key(run.dedupe_key, anchors=run.anchors)

    async def notify_refusals(self, governor: Governor, now: datetime) -> int:
        """Post the notices now owed (``notices.Notices.notify_refusals``)."""
        return await self.notices.notify_refusals(governor, now)

    # -- one attempt ----------------------------------------------------------------------

    async def publish_key(self, key: str, *, anchors: str | None = None) -> PublishResult:
        """One publication attempt for the run recorded under ``key``; then the pull
        request's summary comment is brought up to date (``summary.Summaries``).
        ``anchors``: the pull request's diff, when the caller has it at hand (the worker
        that just read it); otherwise it is fetched when findings need placing."""
        result = await self._one(key, anchors)
        if self._metrics is not None and result.status != "skipped":
            self._metrics.published("existing" if result.existing else result.status)
        return result

    async def _one(self, key: str, anchors: str | None = None) -> PublishResult:
        now = self._clock()
        try:
            pub = await self._claim(key, now)
        except ValueError as exc:
            log.error("the recorded run cannot be published (%s); publish_failed_at stamped",
                      exc, extra={"dedupe_key": key})
            await self._give_up(key, now)
            return PublishResult(key, "failed")
        if pub is None:
            return PublishResult(key, "skipped")
        result = await self._publish(pub, anchors)
        if result.status == "published" and pub.fixed:
            await self._resolve_fixed(pub)
        if self.summaries is not None:
            await self.summaries.update_quietly(pub.repo, pub.pr_number)
        return result

    async def _resolve_fixed(self, pub: Publication) -> None:
        """Resolve the threads of the earlier findings the run said no longer hold, and
        mark them ``resolved``. A failure is logged: the finding stays open, and the next
        review of the pull request offers it to the engine again."""
        extra = {"dedupe_key": pub.dedupe_key, "repo": pub.repo, "pr": pub.pr_number}
        done: list[str] = []
        try:
            installation = await self._installations(pub.repo)
            for fixed in pub.fixed:
                try:
                    await resolve_thread(self._github, installation, fixed.thread_id)
                except GraphQLFailed as exc:
                    if exc.kind != "NOT_FOUND":
                        raise
                    # The thread is gone (its comment deleted): nothing left to resolve.
                done.append(fixed.fingerprint)
        except (GitHubError, httpx.HTTPError) as exc:
            log.warning("could not resolve a fixed finding's thread: %s", exc, extra=extra)
        if done:
            await self._db(posted_findings.mark, pub.repo, pub.pr_number, tuple(done),
                           posted_findings.RESOLVED)
            log.info("resolved %d thread(s) of findings that no longer hold", len(done),
                     extra=extra)

    async def _publish(self, pub: Publication, anchors: str | None = None) -> PublishResult:
        """The claimed run's attempt, under its lease (released whatever happens)."""
        key = pub.dedupe_key
        extra = {"dedupe_key": key, "repo": pub.repo, "pr": pub.pr_number,
                 "attempt": pub.attempts}
        try:
            with anyio.fail_after(ATTEMPT_LIMIT.total_seconds()):
                return await self._holding(key, self._attempt(pub, extra, anchors))
        except (_Permanent, Forbidden, NotFound, Unprocessable) as exc:
            await self._give_up(key, self._clock())
            log.error("GitHub refused the publication; publish_failed_at stamped (clear it "
                      "to offer the run again): %s", exc, extra=extra)
            return PublishResult(key, "failed")
        except (GitHubError, httpx.HTTPError, TimeoutError) as exc:
            if pub.attempts >= MAX_ATTEMPTS:
                await self._give_up(key, self._clock())
                log.error("publication failed %d times; publish_failed_at stamped: %s",
                          pub.attempts, exc, extra=extra)
                return PublishResult(key, "failed")
            log.warning("publication failed for now; it will be retried: %s",
                        exc or type(exc).__name__, extra=extra)
            return PublishResult(key, "retry")
        except Exception:
            # A fault of ours (or the store's): the run stays recorded and is offered
            # again, within the same cap, instead of being retried every minute forever.
            log.exception("publication attempt broke; it will be retried", extra=extra)
            if pub.attempts >= MAX_ATTEMPTS:
                await self._give_up(key, self._clock())
                return PublishResult(key, "failed")
            return PublishResult(key, "retry")
        finally:
            with anyio.CancelScope(shield=True):
                await self._db(runs.release, key)

    async def _holding(self, key: str, attempt: Awaitable[PublishResult]) -> PublishResult:
        """``await attempt``, renewing the run's lease every third of its length meanwhile
        (its exceptions come out as they are, not in a task group's wrapping)."""
        async def renew(_: anyio.CancelScope) -> None:
            await self._renew(key)

        _, result = await alongside(attempt, renew)
        assert result is not None  # nothing cancels an attempt's scope but its own limit
        return result

    async def _renew(self, key: str) -> None:
        every = self._lease.total_seconds() / 3
        while True:
            await anyio.sleep(every)
            now = self._clock()
            try:
                await self._db(runs.renew, key, now, now + self._lease)
            except Exception:  # the store busy for a moment: the next renewal tries again
                log.warning("could not renew the publication lease", exc_info=True,
                            extra={"dedupe_key": key})

    async def _attempt(self, pub: Publication, extra: dict[str, object],
                       anchors: str | None = None) -> PublishResult:
        if self._config().dry_run:
            self._preview(pub)
            await self._record(pub, "dry_run", published=True, comment_id=None)
            log.info("dry run: recorded, not posted", extra=extra)
            return PublishResult(pub.dedupe_key, "dry_run")
        if pub.outcome == "failed" and not pub.is_mention:
            # Nothing is ever posted for it, so there is nothing on GitHub to look for.
            await self._record(pub, "refused", published=False, comment_id=None)
            log.info("the run failed; nothing to post for an automatic review", extra=extra)
            return PublishResult(pub.dedupe_key, "refused")
        installation = await self._installations(pub.repo)
        pull = await read_pull(self._github, installation, pub.repo, pub.pr_number)
        existing = await self._existing(installation, pub, pull)
        if existing is not None:
            log.info("found the run's earlier post by its marker; recorded, not posted again",
                     extra={**extra, "comment_id": existing.comment_id})
            return existing
        if pub.outcome == "failed":
            return await self._refused(installation, pub, extra)
        if pull.head_sha != pub.head_sha:
            return await self._superseded(installation, pub, pull, extra)
        if pub.is_describe:
            return await self._describe(installation, pub, pull, extra)
        return await self._review(installation, pub, extra, anchors)

    def _preview(self, pub: Publication) -> None:
        """Compose what would be posted (a dry run still proves it can be composed)."""
        if pub.is_describe:
            body = compose.description_comment(pub, phrase=self._phrase)
        else:
            body = compose.review(pub, (), pub.findings, phrase=self._phrase).body
        log.info("dry run: would post %d characters", github_length(body),
                 extra={"dedupe_key": pub.dedupe_key, "repo": pub.repo, "pr": pub.pr_number})

    async def _existing(self, installation: int, pub: Publication,
                        pull: PullRequest) -> PublishResult | None:
        marker = run_marker(pub.dedupe_key)
        if pub.is_describe and has_marker(pull.body, marker):
            await self._record(pub, self._found_outcome(pub, pull.body), published=True,
                               comment_id=None)
            return PublishResult(pub.dedupe_key, "published", existing=True)
        found = await lookup.find_post(self._github, installation, pub.repo, pub.pr_number,
                                       marker, bot_login=self._bot_login())
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

    # -- the kinds of post ----------------------------------------------------------------

    async def _refused(self, installation: int, pub: Publication,
                       extra: dict[str, object]) -> PublishResult:
        asker = await lookup.fetch_asker(self._github, installation, pub.repo,
                                         pub.comment_id, pub.comment_source)
        comment_id = await self._comment(
            installation, pub, compose.failure_comment(pub, asker, phrase=self._phrase))
        await self._record(pub, "refused", published=True, comment_id=comment_id,
                           posted=(comment_id,))
        log.info("the run failed; told the person who asked", extra=extra)
        return PublishResult(pub.dedupe_key, "refused", comment_id=comment_id)

    async def _superseded(self, installation: int, pub: Publication, pull: PullRequest,
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

    async def _describe(self, installation: int, pub: Publication, pull: PullRequest,
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

    async def _review(self, installation: int, pub: Publication,
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
            await self._db(runs.count_attempt, pub.dedupe_key)
            post = compose.review(pub, (), pub.findings, phrase=self._phrase, fallback=True,
                                  config_notes=notes)
            post_inline = ()
            data = await self._github.post_json(installation, path, post.payload(pub.head_sha))
        review_id = _id_of(data)
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
        data = await self._github.post_json(
            installation, f"/repos/{pub.repo}/issues/{pub.pr_number}/comments", {"body": body})
        return _id_of(data)

    # -- the store ------------------------------------------------------------------------

    async def _record(self, pub: Publication, outcome: Status, *, published: bool,
                      comment_id: int | None, posted: Iterable[int] = (),
                      inline: Sequence[Finding] = (), new_head: str | None = None) -> None:
        now = self._clock()
        ids = tuple(posted)
        shown = (memory.posted(pub, inline, ids)
                 if outcome == "published" and not pub.is_describe else ())
        repository = await anyio.to_thread.run_sync(self._repo_config, pub.repo)
        summarise = (self.summaries is not None and self.summaries.wanted()
                     and outcome != "dry_run")
        check = text.with_config_notes(
            concluded(pub, outcome, comment_id=comment_id, web_url=self._web_url,
                      fail_on=repository.fail_on(self._checks()), new_head=new_head),
            repository.notes)

        def work() -> None:
            with self._store.transaction() as conn:
                if records.record_outcome(conn, key=pub.dedupe_key, repo=pub.repo,
                                          outcome=outcome, now=now, published=published,
                                          comment_id=comment_id, posted=ids):
                    self._marks.end_open(conn, pub.dedupe_key, check, now)
                    posted_findings.remember(conn, pub.repo, pub.pr_number,
                                             head_sha=pub.head_sha, posted=shown, now=now)
                    if summarise:
                        summaries.request(conn, pub.repo, pub.pr_number, now)
        await anyio.to_thread.run_sync(work)

    async def _give_up(self, key: str, now: datetime) -> None:
        """Stamp ``publish_failed_at``; the check run says the review could not be posted."""
        def work() -> None:
            with self._store.transaction() as conn:
                runs.fail(conn, key, now)
                self._marks.end_open(conn, key, text.not_posted(), now)
        await anyio.to_thread.run_sync(work)

    async def _claim(self, key: str, now: datetime) -> Publication | None:
        def work() -> Publication | None:
            with self._store.transaction() as conn:
                pub = records.claim(conn, key, now, now + self._lease)
                if pub is None:
                    return None
                known = posted_findings.fingerprints(conn, pub.repo, pub.pr_number)
            # Not raised again: what was posted on this pull request before.
            pub = without_repeats(pub, known)
            # What is posted: the thresholds in force (the repository's, or the operator's).
            least, most = limits(self._review_config(), self._repo_config(pub.repo))
            return thresholds(pub, least, most)
        return await anyio.to_thread.run_sync(work)

    async def _db(self, fn: Callable[..., object], *args: Any) -> None:
        def work() -> None:
            with self._store.transaction() as conn:
                fn(conn, *args)
        await anyio.to_thread.run_sync(work)


def _id_of(data: object) -> int:
    value = data.get("id") if isinstance(data, dict) else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise _Permanent("GitHub's answer has no id")
    return value
