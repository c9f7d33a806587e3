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

Steps 4–7, and recording what step 3 found, are posts.py's; this module owns the attempt.
GitHub refusing for good (403, 404, a 422 after the fallback) stamps
``publish_failed_at``; anything transient (rate limits past the client's waits, 5xx,
dropped connections) leaves the run for ``retry.republish_pending``, until
``MAX_ATTEMPTS`` attempts have been made.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Final

import anyio
import httpx

from service.budget.governor import Governor
from service.config.posting import AskConfig, ChecksConfig, PublishConfig
from service.config.repository.merge import Effective
from service.config.schema import ReviewConfig
from service.engine.base import Finding
from service.github.client import GitHubClient
from service.github.errors import Forbidden, GitHubError, NotFound, Unprocessable
from service.github.pulls import read_pull
from service.github.threads import GraphQLFailed, resolve_thread
from service.github.urls import web_url_for
from service.observe.metrics.instruments import Metrics
from service.publish import answers, compose, memory, records
from service.publish.acknowledge import GitHubAck
from service.publish.checks import text
from service.publish.checks.marks import CheckMarks
from service.publish.checks.outcome import concluded
from service.publish.memory import without_repeats
from service.publish.notices import Notices
from service.publish.posts import Permanent, Posts, PublishResult, Status
from service.publish.publication import Publication
from service.publish.run import RecordedRun
from service.publish.safety import github_length
from service.publish.summary import Summaries
from service.publish.thresholds import limits, thresholds
from service.runtime.alongside import alongside
from service.storage import posted_findings, runs, summaries
from service.storage.database import Database, Transaction
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
                 summary_comments: bool = False, metrics: Metrics | None = None,
                 ask: Callable[[], AskConfig] = AskConfig) -> None:
        if lease < timedelta(seconds=3):
            raise ValueError("the publication lease must be at least three seconds")
        self._store = store
        self._github = github
        self._installations = installations
        self._clock = clock
        self._config = config
        self._metrics = metrics
        self._phrase = mention
        self._lease = lease
        self._marks = CheckMarks(checks)
        self._checks = checks
        # The repository's config as last read (the worker read it afresh for this run):
        # its checks.fail_on, and its problems, named on the check run and in a reply.
        self._repo_config = repo_config or (lambda repo: Effective())
        self._review_config = review
        self._ask = ask
        # The pull request's summary comment, asked for with every recorded outcome and
        # written after the attempt (None: not kept, as in the publisher's own tests).
        self.summaries = None if not summary_comments else Summaries(
            store=store, github=github, installations=installations, clock=clock,
            config=config, mention=mention, bot_login=bot_login)
        self._web_url = web_url_for(github.api_url)
        self._acker = GitHubAck(github, installations)
        self._posts = Posts(store=store, github=github, record=self._record, config=config,
                            mention=mention, bot_login=bot_login,
                            repo_config=self._repo_config, ask=ask)
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
            await self._store.write_async(posted_findings.mark, pub.repo, pub.pr_number,
                                          tuple(done), posted_findings.RESOLVED)
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
        except (Permanent, Forbidden, NotFound, Unprocessable) as exc:
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
            await self._store.write_async(runs.release, key, shield=True)

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
                await self._store.write_async(runs.renew, key, now, now + self._lease)
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
        existing = await self._posts.existing(installation, pub, pull)
        if existing is not None:
            log.info("found the run's earlier post by its marker; recorded, not posted again",
                     extra={**extra, "comment_id": existing.comment_id})
            return existing
        if pub.outcome == "failed":
            return await self._posts.refused(installation, pub, extra)
        if pub.is_ask:
            return await self._posts.answer(installation, pub, pull, extra)
        if pull.head_sha != pub.head_sha:
            return await self._posts.superseded(installation, pub, pull, extra)
        if pub.is_describe:
            return await self._posts.describe(installation, pub, pull, extra)
        return await self._posts.review(installation, pub, extra, anchors)

    def _preview(self, pub: Publication) -> None:
        """Compose what would be posted (a dry run still proves it can be composed)."""
        if pub.is_ask and pub.answer is not None and pub.answer.text is not None:
            body = answers.answer_comment(pub, pub.head_sha, phrase=self._phrase, asker=None,
                                          max_chars=self._ask().max_answer_chars)
        elif pub.is_describe:
            body = compose.description_comment(pub, phrase=self._phrase)
        else:
            body = compose.review(pub, (), pub.findings, phrase=self._phrase).body
        log.info("dry run: would post %d characters", github_length(body),
                 extra={"dedupe_key": pub.dedupe_key, "repo": pub.repo, "pr": pub.pr_number})

    # -- the store ------------------------------------------------------------------------

    async def _record(self, pub: Publication, outcome: Status, *, published: bool,
                      comment_id: int | None, posted: Iterable[int] = (),
                      inline: Sequence[Finding] = (), new_head: str | None = None) -> None:
        now = self._clock()
        ids = tuple(posted)
        shown = (memory.posted(pub, inline, ids)
                 if outcome == "published" and not (pub.is_describe or pub.is_ask) else ())
        repository = await anyio.to_thread.run_sync(self._repo_config, pub.repo)
        summarise = (self.summaries is not None and self.summaries.wanted()
                     and outcome != "dry_run")
        check = text.with_config_notes(
            concluded(pub, outcome, comment_id=comment_id, web_url=self._web_url,
                      fail_on=repository.fail_on(self._checks()), new_head=new_head,
                      partial_conclusion=self._review_config().partial_conclusion),
            repository.notes)

        def work(tx: Transaction) -> None:
            if records.record_outcome(tx, key=pub.dedupe_key, repo=pub.repo,
                                      outcome=outcome, now=now, published=published,
                                      comment_id=comment_id, posted=ids):
                self._marks.end_open(tx, pub.dedupe_key, check, now)
                posted_findings.remember(tx, pub.repo, pub.pr_number,
                                         head_sha=pub.head_sha, posted=shown, now=now)
                if summarise:
                    summaries.request(tx, pub.repo, pub.pr_number, now)
        await self._store.write_async(work)

    async def _give_up(self, key: str, now: datetime) -> None:
        """Stamp ``publish_failed_at``; the check run says the review could not be posted."""
        def work(tx: Transaction) -> None:
            runs.fail(tx, key, now)
            self._marks.end_open(tx, key, text.not_posted(), now)
        await self._store.write_async(work)

    async def _claim(self, key: str, now: datetime) -> Publication | None:
        def claim(tx: Transaction) -> Publication | None:
            pub = records.claim(tx, key, now, now + self._lease)
            if pub is None:
                return None
            # Not raised again: what was posted on this pull request before.
            return without_repeats(pub, posted_findings.fingerprints(tx, pub.repo,
                                                                      pub.pr_number))
        pub = await self._store.write_async(claim)
        if pub is None:
            return None
        # What is posted: the thresholds in force (the repository's, or the operator's).
        repository = await anyio.to_thread.run_sync(self._repo_config, pub.repo)
        least, most = limits(self._review_config(), repository)
        return thresholds(pub, least, most)
