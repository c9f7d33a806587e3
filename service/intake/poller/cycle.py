"""One poll of one repository: fetch both streams, decide, apply, then advance the marks.

For each stream the order is fixed, and it is the whole crash story:

1. the stream is marked *unfinished* (in memory) before anything is fetched;
2. its pages are fetched (the first conditionally, unless the last attempt was
   unfinished: the ETag stored by a fetch whose items were never applied would answer
   304 and hide them, so an unfinished stream is fetched in full);
3. every decision is applied in **one** store transaction
   (``service.intake.ingest.apply_decisions``, the seam the webhook receiver uses, so both
   paths have the same effect and keys);
4. only after that transaction commits is the watermark advanced, to the newest
   timestamp seen in the payload (never the clock);
5. the stream is marked finished.

A crash before 3 commits loses nothing (the mark has not moved); a crash between 3 and 4
re-reads the same items next time and every insert is a duplicate. A crash after 4 forgets
the in-memory ``Boundary`` (what was seen at the mark's own second); the next process
replays the items at a mark a regular poll set, which is a duplicate insert for each one
already applied and finds one that arrived in that second after the poll. Only a cold
start's mark (recorded as such, ``seed_key``) keeps its items considered: they predate the
install and were never decided. A process restart
mints a new installation token, and ETags are stored per token, so a restarted poller
never receives a 304 for a listing it had not finished.

Where each stream stands between polls (marks, boundaries, unfinished fetches) is
marks.py's; store calls run off the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from service.github.client import GitHubClient
from service.github.payload import PayloadError
from service.github.pulls import PullRequest, parse_listed_pull
from service.intake.ingest import Applied, Decided, apply_decisions
from service.intake.rules.classify import (
    classify_comment,
    classify_pull_request,
    pull_request_number,
)
from service.intake.rules.decisions import Decision, Ignore, TriggerContext
from service.model.jobs import CommentSource
from service.storage import closures
from service.storage import queue as queue_table
from service.storage.database import Database, Transaction
from service.storage.watermarks import watermark_key

from .marks import StreamMarks, seed_key
from .pages import Page, Tally, fetch_page
from .streams import (
    COMMENTS,
    EPOCH,
    PULL_REQUESTS,
    Boundary,
    CommentItem,
    CommentSighting,
    PullAction,
    PullHistory,
    PullMemory,
    comment_endpoints,
    comment_seed_endpoints,
    comment_sighting,
    next_boundary,
    parse_comment,
    pull_action,
    pulls_endpoint,
)

log = logging.getLogger(__name__)

@dataclass
class RepositoryReport:
    """What one poll of one repository did."""

    repo: str
    installation_id: int
    seeded: list[str] = field(default_factory=list)      # streams seeded (cold start)
    enqueued: list[str] = field(default_factory=list)    # new queue rows
    duplicates: list[str] = field(default_factory=list)  # already queued (e.g. by a webhook)
    cancelled: list[str] = field(default_factory=list)   # pending rows of closed PRs
    declined: list[str] = field(default_factory=list)    # findings declined by a reply
    watermarks: dict[str, datetime] = field(default_factory=dict)  # in force afterwards
    tally: Tally = field(default_factory=Tally)

    def absorb(self, applied: Applied) -> None:
        self.enqueued.extend(applied.enqueued)
        self.duplicates.extend(applied.duplicates)
        self.cancelled.extend(applied.cancelled)
        self.declined.extend(applied.declined)


def _complete_at(page: Page, times: Sequence[datetime], newest: datetime) -> bool:
    """Whether a newest-first page holds every item at ``newest``: it is the last page,
    or it already reached an older item."""
    return page.next_url is None or any(t < newest for t in times)


class RepositoryPoller:
    """Polls repositories one at a time; holds what must outlive a single poll."""

    def __init__(
        self, client: GitHubClient, store: Database,
        ctx: TriggerContext | Callable[[], TriggerContext], *,
        memory: PullMemory | None = None,
    ) -> None:
        self._client = client
        self._store = store
        self._marks = StreamMarks(store)
        # A callable is read at each use: the daemon replaces the context once the App's
        # slug is known, and the rules must see the new one at once.
        self._ctx_source = ctx
        self._memory = memory if memory is not None else PullMemory()

    @property
    def _ctx(self) -> TriggerContext:
        source = self._ctx_source
        return source if isinstance(source, TriggerContext) else source()

    async def poll(self, repo: str, installation_id: int, now: datetime, *,
                   seed_floor: datetime | None = None) -> RepositoryReport:
        """Poll both streams of ``repo`` as ``installation_id``; ``now`` stamps new rows.

        ``seed_floor`` is how far back a first poll may look for what happened after the
        App began watching ``repo`` (``StreamMarks.watched_since``); None: a first poll
        seeds at the newest item, as a cold start does.
        """
        report = RepositoryReport(repo=repo, installation_id=installation_id)
        await self._pull_requests(repo, installation_id, now, report, seed_floor)
        await self._comments(repo, installation_id, now, report, seed_floor)
        return report

    @staticmethod
    def _apply(tx: Transaction, now: datetime,
               decide: Callable[[Transaction], list[Decision]]) -> Applied:
        """Decide and apply inside one write transaction."""
        applied = Applied()
        for one in apply_decisions(tx, [Decided(decision, now) for decision in decide(tx)]):
            applied.add(one)
        return applied

    def _log_applied(self, repo: str, stream: str, applied: Applied) -> None:
        for key in applied.enqueued:
            log.info("poller enqueued", extra={"repo": repo, "stream": stream,
                                               "dedupe_key": key})
        for key in applied.cancelled:
            log.info("poller cancelled a pending row of a closed pull request",
                     extra={"repo": repo, "stream": stream, "dedupe_key": key})

    # -- pull requests -----------------------------------------------------------------

    async def _pull_requests(
        self, repo: str, installation_id: int, now: datetime, report: RepositoryReport,
        seed_floor: datetime | None,
    ) -> None:
        key = watermark_key(PULL_REQUESTS, repo)
        mark = await self._marks.watermark(key)
        forced = self._marks.begin(key)
        endpoint = pulls_endpoint(repo)
        seeding = mark is None
        page = await fetch_page(self._client, installation_id, endpoint.path, endpoint.params,
                                conditional=not forced, tally=report.tally, seeding=seeding)
        if page.not_modified:
            if mark is not None:  # no pull request was updated since the last listing
                self._finish(key, report, PULL_REQUESTS, mark)
                return
            # Validators without a mark: an earlier seed fetched but never stored. The
            # seed needs the items, so ask again without them.
            page = await fetch_page(self._client, installation_id, endpoint.path,
                                    endpoint.params, conditional=False, tally=report.tally,
                                    seeding=True)
        if mark is None:
            since = await self._marks.watched_since(repo, seed_floor)
            mark, newer = await self._seed_pulls(repo, key, page, report, since)
            if not newer:
                self._finish(key, report, PULL_REQUESTS, mark)
                return
            # Updated since the App began watching: decided now, from the same page.
        sightings = await self._collect_pulls(repo, installation_id, page, mark, report.tally)
        boundary = await self._marks.boundary(key, seed_key(PULL_REQUESTS, repo), mark)
        if sightings:
            applied = await self._store.write_async(
                self._apply, now,
                lambda conn: self._decide_pulls(conn, repo, sightings, mark, boundary))
            # Committed: what was decided is now history, whatever happens to the mark.
            for pr, _ in sightings:
                self._memory.remember(repo, pr)
            report.absorb(applied)
            self._log_applied(repo, PULL_REQUESTS, applied)
        new_mark = max([mark, *(pr.updated_at for pr, _ in sightings)])
        at_mark = [pr.number for pr, _ in sightings if pr.updated_at == new_mark]
        self._marks.set_boundary(key, next_boundary(boundary, mark, new_mark, at_mark))
        stored = await self._marks.move(key, seed_key(PULL_REQUESTS, repo), mark, new_mark)
        self._finish(key, report, PULL_REQUESTS, stored)

    def _parse_pull(self, repo: str, obj: object) -> PullRequest | None:
        try:
            return parse_listed_pull(obj)
        except PayloadError as exc:
            log.warning("skipping a malformed pull request in the listing",
                        extra={"repo": repo, "error": str(exc)})
            return None

    async def _collect_pulls(
        self, repo: str, installation_id: int, page: Page, mark: datetime, tally: Tally,
    ) -> list[tuple[PullRequest, Mapping[str, Any]]]:
        """Every pull request updated at or after ``mark``, paging newest first until
        one older than the mark shows the rest are older too."""
        sightings: list[tuple[PullRequest, Mapping[str, Any]]] = []
        while True:
            assert page.items is not None
            older = False
            for obj in page.items:
                pr = self._parse_pull(repo, obj)
                if pr is None:
                    continue
                if pr.updated_at < mark:
                    older = True
                    continue
                sightings.append((pr, obj))
            if older or page.next_url is None:
                return sightings
            page = await fetch_page(self._client, installation_id, page.next_url, None,
                                    conditional=False, tally=tally)

    async def _seed_pulls(
        self, repo: str, key: str, page: Page, report: RepositoryReport,
        since: datetime | None,
    ) -> tuple[datetime, bool]:
        """Cold start: the mark goes to the newest pull request, or to ``since`` when
        some were updated after it; nothing is enqueued. The mark, and whether the page
        holds pull requests updated after it (the caller decides those)."""
        assert page.items is not None
        states = [pr for pr in (self._parse_pull(repo, obj) for obj in page.items) if pr]
        newest = max((pr.updated_at for pr in states), default=EPOCH)
        seed = newest if since is None else min(newest, since)
        for pr in states:
            if pr.updated_at <= seed:  # a later one is seen for the first time when decided
                self._memory.remember(repo, pr)
        times = [pr.updated_at for pr in states]
        self._marks.set_seed_boundary(key, seed, [(pr.number, pr.updated_at) for pr in states],
                                      complete=_complete_at(page, times, seed))
        await self._marks.advance(seed_key(PULL_REQUESTS, repo), seed)  # before the mark itself
        stored = await self._marks.advance(key, seed)
        report.seeded.append(PULL_REQUESTS)
        log.info("seeded a watermark; nothing before it enqueued",
                 extra={"repo": repo, "stream": PULL_REQUESTS, "watermark": stored.isoformat(),
                        "items_seen": len(states), "newer": sum(t > seed for t in times)})
        return stored, newest > seed

    def _pull_history(self, conn: Transaction, repo: str, number: int) -> PullHistory:
        heads = frozenset(queue_table.known_heads(conn, repo, number))
        last_enqueued = queue_table.last_opened_at(conn, repo, number)
        closed_at = closures.closed_at(conn, repo, number)
        reopened = closed_at is not None and (last_enqueued is None or closed_at > last_enqueued)
        return PullHistory(known_heads=heads, reopened=reopened)

    def _decide_pulls(
        self, conn: Transaction, repo: str,
        sightings: list[tuple[PullRequest, Mapping[str, Any]]], mark: datetime,
        boundary: Boundary | None,
    ) -> list[Decision]:
        decisions: list[Decision] = []
        for pr, obj in sightings:
            previous = self._memory.get(repo, pr.number)
            verdict = pull_action(pr, previous, self._pull_history(conn, repo, pr.number),
                                  mark, boundary)
            extra = {"repo": repo, "pr": pr.number, "why": verdict.why}
            if verdict.action is PullAction.SKIP:
                log.debug("poller: nothing to do for a pull request", extra=extra)
                continue
            try:
                decision = classify_pull_request(obj, repo, self._ctx,
                                                 pushed=verdict.action is PullAction.PUSH)
            except PayloadError as exc:
                log.warning("skipping a malformed pull request",
                            extra={**extra, "error": str(exc)})
                continue
            if isinstance(decision, Ignore):
                log.debug("poller ignored a pull request",
                          extra={**extra, "reason": decision.reason})
            decisions.append(decision)
        return decisions

    # -- comments ------------------------------------------------------------------------

    async def _comments(
        self, repo: str, installation_id: int, now: datetime, report: RepositoryReport,
        seed_floor: datetime | None,
    ) -> None:
        key = watermark_key(COMMENTS, repo)
        mark = await self._marks.watermark(key)
        forced = self._marks.begin(key)
        if mark is None:
            # Seed, then poll from the seed at once: the same cycle stores the ETags the
            # next one sends, and anything that arrived between the two requests is new.
            since = await self._marks.watched_since(repo, seed_floor)
            mark = await self._seed_comments(repo, installation_id, key, report, since)
        comments: list[CommentItem] = []
        complete = True  # every endpoint answered in full (no 304)
        for endpoint in comment_endpoints(repo, mark):
            assert endpoint.source is not None
            page = await fetch_page(self._client, installation_id, endpoint.path,
                                    endpoint.params, conditional=not forced, tally=report.tally)
            complete = complete and not page.not_modified
            while page.items is not None:
                comments.extend(self._parse_comments(repo, endpoint.source, page.items))
                if page.next_url is None:
                    break
                page = await fetch_page(self._client, installation_id, page.next_url, None,
                                        conditional=False, tally=report.tally)
        boundary = await self._marks.boundary(key, seed_key(COMMENTS, repo), mark)
        sightings = [(c, comment_sighting(c.key, c.created_at, c.updated_at, mark, boundary))
                     for c in comments]
        actionable = [(c, s) for c, s in sightings if s is not CommentSighting.SKIP]
        if actionable:
            applied = await self._store.write_async(
                self._apply, now, lambda conn: self._decide_comments(repo, actionable))
            report.absorb(applied)
            self._log_applied(repo, COMMENTS, applied)
        new_mark = max([mark, *(c.updated_at for c in comments)])
        # A 304 endpoint's items at an unmoved mark are unknown to a boundary built now,
        # so only a complete listing (or one extending a known boundary) may replace it.
        if new_mark > mark or complete or (boundary is not None and boundary.at == mark):
            at_mark = [c.key for c in comments if c.updated_at == new_mark]
            self._marks.set_boundary(key, next_boundary(boundary, mark, new_mark, at_mark))
        stored = await self._marks.move(key, seed_key(COMMENTS, repo), mark, new_mark)
        self._finish(key, report, COMMENTS, stored)

    def _parse_comments(
        self, repo: str, source: CommentSource, items: list[Any],
    ) -> list[CommentItem]:
        parsed: list[CommentItem] = []
        for obj in items:
            try:
                parsed.append(parse_comment(obj, source))
            except PayloadError as exc:
                log.warning("skipping a malformed comment in the listing",
                            extra={"repo": repo, "source": source, "error": str(exc)})
        return parsed

    async def _seed_comments(
        self, repo: str, installation_id: int, key: str, report: RepositoryReport,
        since: datetime | None,
    ) -> datetime:
        """Cold start: the mark goes to the newest comment of either kind, or to
        ``since`` when some were updated after it (the poll from the mark decides those)."""
        pages: list[tuple[Page, list[CommentItem]]] = []
        for endpoint in comment_seed_endpoints(repo):
            assert endpoint.source is not None
            page = await fetch_page(self._client, installation_id, endpoint.path,
                                    endpoint.params, conditional=False, tally=report.tally,
                                    seeding=True)
            assert page.items is not None
            pages.append((page, self._parse_comments(repo, endpoint.source, page.items)))
        comments = [c for _, parsed in pages for c in parsed]
        newest = max((c.updated_at for c in comments), default=EPOCH)
        seed = newest if since is None else min(newest, since)
        complete = all(_complete_at(page, [c.updated_at for c in parsed], seed)
                       for page, parsed in pages)
        self._marks.set_seed_boundary(key, seed, [(c.key, c.updated_at) for c in comments],
                                      complete=complete)
        await self._marks.advance(seed_key(COMMENTS, repo), seed)  # before the mark itself
        stored = await self._marks.advance(key, seed)
        report.seeded.append(COMMENTS)
        log.info("seeded a watermark; nothing before it enqueued",
                 extra={"repo": repo, "stream": COMMENTS, "watermark": stored.isoformat(),
                        "items_seen": len(comments),
                        "newer": sum(c.updated_at > seed for c in comments)})
        return stored

    def _decide_comments(
        self, repo: str, actionable: Sequence[tuple[CommentItem, CommentSighting]],
    ) -> list[Decision]:
        decisions: list[Decision] = []
        for comment, sighting in actionable:
            extra = {"repo": repo, "comment_id": comment.comment_id, "source": comment.source}
            try:
                number = pull_request_number(comment.obj, comment.source)
                decision = classify_comment(comment.obj, comment.source, repo, number, self._ctx,
                                            edited=sighting is CommentSighting.EDITED)
            except PayloadError as exc:
                log.warning("skipping a malformed comment", extra={**extra, "error": str(exc)})
                continue
            if isinstance(decision, Ignore):
                log.debug("poller ignored a comment", extra={**extra, "reason": decision.reason})
            decisions.append(decision)
        return decisions

    def _finish(self, key: str, report: RepositoryReport, stream: str, mark: datetime) -> None:
        self._marks.finish(key)
        report.watermarks[stream] = mark
