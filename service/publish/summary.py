"""``Summaries``: the App's one summary comment on each pull request, edited in place.

Every publication that ends a run asks for the summary in the transaction that records it
(``service.storage.summaries.request``), so the ask outlives a crash. ``update`` then
writes it: it takes the pull request's short lease in ``pr_summaries`` (another process
writing it meanwhile only bumps the version, and the holder writes again before it lets
go), renders the comment from the store, and edits the known comment — or creates one. A
create is stamped before it is sent: when its answer is lost (a crash, a dropped
connection), the next attempt looks for the App's comment carrying ``SUMMARY_MARKER`` and
edits that one, so the comment is never posted twice. A comment a person deleted is made
again. ``update_pending`` (the daemon's maintenance loop) writes every summary still
behind what was asked.

Nothing here is written in a dry run, or with ``publish.summary_comment`` off.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any, Final

import anyio
import httpx

from service.config.posting import PublishConfig
from service.github.client import GitHubClient
from service.github.errors import Forbidden, GitHubError, NotFound, Unprocessable
from service.publish import lookup
from service.publish.summary_text import SUMMARY_MARKER, render
from service.storage import summaries
from service.storage.database import Database
from service.storage.summaries import Lease

log = logging.getLogger(__name__)

#: How long one update may hold a pull request's summary (its GitHub calls included).
SUMMARY_LEASE: Final = timedelta(minutes=5)
#: Summaries written per ``update_pending`` call; the rest wait for the next.
BATCH: Final = 20


class Summaries:
    """Writes the summary comments (module docstring)."""

    def __init__(self, *, store: Database, github: GitHubClient,
                 installations: Callable[[str], Awaitable[int]],
                 clock: Callable[[], datetime], config: Callable[[], PublishConfig],
                 mention: str, bot_login: Callable[[], str | None] = lambda: None,
                 lease: timedelta = SUMMARY_LEASE) -> None:
        self._store = store
        self._github = github
        self._installations = installations
        self._clock = clock
        self._config = config
        self._phrase = mention
        self._bot_login = bot_login
        self._lease = lease

    def wanted(self) -> bool:
        """True when summaries are written (on, and not a dry run)."""
        config = self._config()
        return config.summary_comment and not config.dry_run

    async def update(self, repo: str, pr_number: int) -> bool:
        """Bring the pull request's summary up to date; True when this call wrote it.

        False when there was nothing to write, another process holds it (and will write
        again), or GitHub failed: a transient failure leaves it to ``update_pending``; a
        refusal for good (403, 422) is logged and the summary stays as it was until the
        next review asks again.
        """
        if not self.wanted():
            return False
        now = self._clock()
        got = await self._db(summaries.lease, repo, pr_number, now, now + self._lease)
        if got is None:
            return False
        extra = {"repo": repo, "pr": pr_number}
        if got.version <= got.shown_version:
            await self._db(summaries.release, repo, pr_number)
            return False
        try:
            with anyio.fail_after((self._lease * 0.8).total_seconds()):
                await self._write_until_current(repo, pr_number, got)
            return True
        except (Forbidden, Unprocessable) as exc:
            log.error("GitHub refused the summary comment; it is left as it was: %s", exc,
                      extra=extra)
            await self._db(summaries.finish, repo, pr_number, got.comment_id, got.version)
            await self._db(summaries.release, repo, pr_number)
        except (GitHubError, httpx.HTTPError, TimeoutError) as exc:
            log.warning("could not write the summary comment now; it will be retried: %s",
                        exc or type(exc).__name__, extra=extra)
            await self._db(summaries.release, repo, pr_number)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._db(summaries.release, repo, pr_number)
            raise
        return False

    async def update_quietly(self, repo: str, pr_number: int) -> None:
        """``update``, logging instead of raising: a publication never fails because its
        summary could not be written."""
        try:
            await self.update(repo, pr_number)
        except Exception:
            log.exception("writing the summary comment broke; it will be retried",
                          extra={"repo": repo, "pr": pr_number})

    async def update_pending(self, now: datetime, limit: int = BATCH) -> int:
        """Write every summary still behind what was asked (up to ``limit``)."""
        if not self.wanted():
            return 0
        behind = await self._read(summaries.pending, now, limit)
        for repo, pr_number in behind:
            await self.update_quietly(repo, pr_number)
        return len(behind)

    # -- one pull request's comment ---------------------------------------------------------

    async def _write_until_current(self, repo: str, pr_number: int, got: Lease) -> None:
        installation = await self._installations(repo)
        comment_id, started, version = got.comment_id, got.create_started_at, got.version
        while True:
            facts = await self._read(summaries.facts, repo, pr_number)
            body = render(facts, phrase=self._phrase)
            comment_id = await self._put(installation, repo, pr_number, body,
                                         comment_id=comment_id, started=started)
            wanted = await self._db(summaries.finish, repo, pr_number, comment_id, version)
            if wanted is None:
                log.info("summary comment written", extra={
                    "repo": repo, "pr": pr_number, "comment_id": comment_id})
                return
            version = wanted  # asked again while this one was being written

    async def _put(self, installation: int, repo: str, pr_number: int, body: str, *,
                   comment_id: int | None, started: datetime | None) -> int:
        if comment_id is not None:
            try:
                await self._edit(installation, repo, comment_id, body)
                return comment_id
            except NotFound:
                log.info("the summary comment was deleted; making it again",
                         extra={"repo": repo, "pr": pr_number, "comment_id": comment_id})
                started = None
        if started is not None:
            # A create was sent before and its answer never recorded: it may exist.
            found = await lookup.find_post(self._github, installation, repo, pr_number,
                                           SUMMARY_MARKER, bot_login=self._bot_login(),
                                           reviews=False)
            if found is not None:
                await self._edit(installation, repo, found.id, body)
                return found.id
        await self._db(summaries.creating, repo, pr_number, self._clock())
        data = await self._github.post_json(
            installation, f"/repos/{repo}/issues/{pr_number}/comments", {"body": body})
        value = data.get("id") if isinstance(data, dict) else None
        if not isinstance(value, int) or isinstance(value, bool):
            raise Unprocessable("GitHub's answer to the summary comment has no id", status=422)
        return value

    async def _edit(self, installation: int, repo: str, comment_id: int, body: str) -> None:
        await self._github.patch_json(installation,
                                      f"/repos/{repo}/issues/comments/{comment_id}",
                                      {"body": body})

    # -- the store ----------------------------------------------------------------------------

    async def _db(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._store.write_async(fn, *args, shield=True)

    async def _read(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._store.read_async(fn, *args)
