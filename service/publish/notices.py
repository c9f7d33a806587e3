"""Telling the person who asked why their request is not being answered: one notice per
trigger, ever.

Two situations get a notice, and only for mentions (a ``pr_opened`` has nobody who asked;
a notice on every pull request while the budget is spent would be exactly the noise people
complain about in other review bots):

- **the budget refuses it** (``Governor.refusals`` for its key, or a refusal that applies
  to every candidate — disabled, a window exhausted or unable to fit a run, the monthly
  dollar cap, the circuit breaker — in ``Governor.last_refusal`` and still in force): the
  reply names the window and when allowance frees up; the request stays queued;
- **the worker refused it before running** (the pre-flight estimate above one run's
  reservation, or every file over ``review.max_diff_lines``; the ledger row settles at
  zero as ``refused`` and no run is recorded): the reply says it was too large to review;
- **every attempt failed** (the engine could not start, or something outside the review
  broke, each time): the queue abandoned it, and the reply says so and how to ask again.

"Once" is a row in ``notices`` keyed by the dedupe key, inserted *before* the post: a
second pass, a second process or a restart finds the row and posts nothing. The post also
carries ``<!-- pr-review-agent:notice:{key} -->``, and the pull request's comments are
searched for it first, so a post GitHub applied but answered with an error is recorded
rather than repeated. A transient failure removes the row again (the next pass retries);
a refusal by GitHub (403, 404, 422) keeps it, so a locked pull request is not retried
forever. A crash between the insert and the post leaves the row: that person gets no
notice rather than two.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final

import anyio
import httpx

from service.budget.governor import Governor
from service.budget.refusal import Refusal
from service.budget.snapshot import Snapshot
from service.config.posting import PublishConfig
from service.github.client import GitHubClient
from service.github.errors import Forbidden, GitHubError, NotFound, Unprocessable
from service.intake.rules.mention import neutralise
from service.publish import lookup
from service.publish.compose import Asker, address, their_request
from service.publish.markers import notice_marker
from service.publish.safety import MAX_BODY, truncate
from service.storage import agent_comments, notices
from service.storage.database import Database
from service.storage.notices import Candidate

log = logging.getLogger(__name__)

#: Refusals that are not about the candidate: when one is in force, every pending mention
#: is refused for the same reason (the claim stops at the first candidate).
GLOBAL_REASONS: Final = frozenset({"disabled", "exhausted", "insufficient", "breaker",
                                   "monthly_usd"})
#: Refusals a mention can get a notice for (``mention_only`` only ever refuses pr_opened).
NOTICE_REASONS: Final = GLOBAL_REASONS | {"per_actor", "per_installation", "repository",
                                          "pacer"}
#: A pre-flight refusal older than this gets no notice (a store upgraded to this version
#: must not answer refusals from long ago).
PREFLIGHT_LOOKBACK: Final = timedelta(hours=24)
BATCH: Final = 100

_WINDOWS: Final = {"session": "5-hour session", "daily": "24-hour", "weekly": "7-day",
                   "monthly": "30-day dollar"}

# -- the text (pure) ---------------------------------------------------------------------


def when(at: datetime, now: datetime) -> str:
    """``2026-11-02 12:00 UTC (in about 3 hours)``."""
    seconds = max(0, int((at - now).total_seconds()))
    if seconds < 90:
        rel = "in about a minute"
    elif seconds < 90 * 60:
        rel = f"in about {round(seconds / 60)} minutes"
    elif seconds < 36 * 3600:
        rel = f"in about {round(seconds / 3600)} hours"
    else:
        rel = f"in about {round(seconds / 86400)} days"
    return f"**{at.strftime('%Y-%m-%d %H:%M')} UTC** ({rel})"


def _why(refusal: Refusal) -> str:
    window = _WINDOWS.get(refusal.window or "", refusal.window or "budget")
    return {
        "disabled": "the operator has paused reviews (budget.enabled is off)",
        "exhausted": f"the agent has used its whole {window} token allowance",
        "insufficient": (f"what is left of the agent's {window} token allowance is less than "
                         "one run needs"),
        "monthly_usd": "the agent has reached its monthly dollar cap",
        "breaker": ("the model's plan reported that its usage limit was reached, so reviews "
                    "are paused"),
        "per_actor": f"you have used your share of the {window} token allowance",
        "per_installation": ("this organisation's installation of the agent has used its "
                             f"share of the {window} token allowance"),
        "repository": ("this repository has had as many reviews as the operator allows one "
                       "repository in 24 hours"),
        "pacer": ("this pull request has had as many reviews as one pull request may have "
                  "in 24 hours"),
    }.get(refusal.reason, "the token budget does not allow another run yet")


def _what(command: str) -> str:
    """What a request asks for, in words."""
    return {"describe": "description", "ask": "answer"}.get(command, "review")


def refusal_text(key: str, refusal: Refusal, asker: Asker | None, *, command: str,
                 now: datetime, phrase: str) -> str:
    """The notice for a request the budget refused: why, and when it can run."""
    what = _what(command)
    if refusal.frees_at is not None and refusal.frees_at > now:
        after = (f"Allowance frees up at {when(refusal.frees_at, now)}; the request stays "
                 "queued and runs then.")
    elif refusal.reason == "disabled":
        after = "The request stays queued and runs when reviews are resumed."
    else:
        after = "The request stays queued and runs as soon as the budget allows."
    text = (f"{address(asker)}the {what} for {their_request(asker)} has not started: "
            f"{_why(refusal)}. {after}")
    return truncate(neutralise(f"{notice_marker(key)}\n\n{text}", phrase), MAX_BODY, "")


def preflight_text(key: str, asker: Asker | None, command: str, phrase: str) -> str:
    """The notice for a request the worker refused before running it."""
    what = _what(command)
    text = (f"{address(asker)}the {what} for {their_request(asker)} was not run: the change "
            "is too large for one run (its estimated cost is above one run's token "
            "reservation, budget.max_run_tokens, or every file is over "
            "review.max_diff_lines). Nothing was charged. Splitting the pull request, or "
            "excluding generated files, lets it be reviewed.")
    return truncate(neutralise(f"{notice_marker(key)}\n\n{text}", phrase), MAX_BODY, "")


def abandoned_text(key: str, asker: Asker | None, command: str, stop_reason: str | None,
                   phrase: str) -> str:
    """The notice for a request every attempt of which failed."""
    what = _what(command)
    last = {"engine_unavailable": "the review engine could not be started",
            "infrastructure": "something outside the review failed (GitHub, git or the "
                              "store)"}.get(stop_reason or "", "it did not finish")
    text = (f"{address(asker)}the {what} for {their_request(asker)} could not be done: "
            f"every attempt failed (the last: {last}). The operator's log says more. "
            f"Writing `{phrase} {command}` again asks anew.")
    return truncate(neutralise(f"{notice_marker(key)}\n\n{text}", phrase), MAX_BODY, "")


def in_force(refusal: Refusal, snapshot: Snapshot, now: datetime) -> bool:
    """Whether ``refusal`` still holds at ``now``, judged on a fresh budget snapshot."""
    if refusal.reason == "disabled":
        return not snapshot.enabled
    if refusal.reason == "breaker":
        return snapshot.breaker.tripped
    if refusal.reason in ("exhausted", "insufficient"):
        return any(w.remaining < snapshot.max_run_tokens for w in snapshot.windows)
    if refusal.reason == "monthly_usd":
        return snapshot.monthly is not None and not snapshot.monthly.fits_a_run()
    return refusal.frees_at is None or refusal.frees_at > now


# -- posting -----------------------------------------------------------------------------


class Notices:
    """Posts the one notice a trigger may get (see the module docstring)."""

    def __init__(self, *, store: Database, github: GitHubClient,
                 installations: Callable[[str], Awaitable[int]],
                 config: Callable[[], PublishConfig], mention: str,
                 bot_login: Callable[[], str | None] = lambda: None) -> None:
        self._store = store
        self._github = github
        self._installations = installations
        self._config = config
        self._phrase = mention
        self._bot_login = bot_login

    async def notify_refusals(self, governor: Governor, now: datetime) -> int:
        """Post every notice now owed; returns how many were posted. Safe to call as
        often as wanted: a trigger that has had its notice is never considered again."""
        if self._config().dry_run:
            return 0
        posted = 0
        waiting = await self._read(notices.pending_mentions, BATCH)
        snapshot: Snapshot | None = None
        for candidate in waiting:
            refusal = self._refusal_for(governor, candidate.dedupe_key)
            if refusal is None:
                continue
            if snapshot is None:
                snapshot = await anyio.to_thread.run_sync(governor.snapshot, now)
            if not in_force(refusal, snapshot, now):
                continue
            posted += await self._notify(candidate, f"budget:{refusal.reason}", now,
                                         self._refusal_notice(candidate, refusal, now))
        refused = await self._read(notices.preflight_refusals, now - PREFLIGHT_LOOKBACK,
                                   BATCH)
        for candidate in refused:
            posted += await self._notify(candidate, "preflight", now,
                                         self._preflight_notice(candidate))
        for candidate in await self._read(notices.abandoned_mentions, now - PREFLIGHT_LOOKBACK,
                                          BATCH):
            posted += await self._notify(candidate, "abandoned", now,
                                         self._abandoned_notice(candidate))
        return posted

    def _refusal_notice(self, c: Candidate, refusal: Refusal, now: datetime
                        ) -> Callable[[Asker | None], str]:
        def text(asker: Asker | None) -> str:
            return refusal_text(c.dedupe_key, refusal, asker, command=c.command, now=now,
                                phrase=self._phrase)
        return text

    def _preflight_notice(self, c: Candidate) -> Callable[[Asker | None], str]:
        def text(asker: Asker | None) -> str:
            return preflight_text(c.dedupe_key, asker, c.command, self._phrase)
        return text

    def _abandoned_notice(self, c: Candidate) -> Callable[[Asker | None], str]:
        def text(asker: Asker | None) -> str:
            return abandoned_text(c.dedupe_key, asker, c.command, c.stop_reason, self._phrase)
        return text

    @staticmethod
    def _refusal_for(governor: Governor, key: str) -> Refusal | None:
        own = governor.refusals.get(key)
        if own is not None and own.reason in NOTICE_REASONS:
            return own
        last = governor.last_refusal
        if last is not None and last.reason in GLOBAL_REASONS:
            return replace(last, dedupe_key=key)
        return None

    async def _notify(self, c: Candidate, kind: str, now: datetime,
                      text: Callable[[Asker | None], str]) -> int:
        extra = {"dedupe_key": c.dedupe_key, "repo": c.repo, "pr": c.pr_number, "kind": kind}
        if not await self._write(notices.claim, c.dedupe_key, kind, now):
            return 0
        try:
            installation = await self._installations(c.repo)
            marker = notice_marker(c.dedupe_key)
            found = await lookup.find_post(self._github, installation, c.repo, c.pr_number,
                                           marker, bot_login=self._bot_login(), reviews=False)
            if found is not None:
                await self._posted(c, found.id, now)
                log.info("notice already on the pull request; recorded", extra=extra)
                return 0
            asker = await lookup.fetch_asker(self._github, installation, c.repo,
                                             c.comment_id, c.comment_source)
            data = await self._github.post_json(
                installation, f"/repos/{c.repo}/issues/{c.pr_number}/comments",
                {"body": text(asker)})
        except (Forbidden, NotFound, Unprocessable) as exc:
            log.error("GitHub refused the notice; it will not be retried: %s", exc, extra=extra)
            return 0
        except (GitHubError, httpx.HTTPError) as exc:
            await self._write(notices.unclaim, c.dedupe_key)
            log.warning("notice not posted; retried at the next pass: %s", exc, extra=extra)
            return 0
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._write(notices.unclaim, c.dedupe_key)
            raise
        comment_id = int(data["id"])
        await self._posted(c, comment_id, now)
        log.info("notice posted", extra={**extra, "comment_id": comment_id})
        return 1

    async def _posted(self, c: Candidate, comment_id: int, now: datetime) -> None:
        def work() -> None:
            with self._store.transaction() as tx:
                notices.posted(tx, c.dedupe_key, comment_id, now)
                agent_comments.remember(tx, c.repo, (comment_id,), now)
        await self._store.run(work)

    async def _read(self, query: Callable[..., list[Candidate]], *args: Any
                    ) -> list[Candidate]:
        return await self._store.read_async(query, *args)

    async def _write(self, change: Callable[..., bool], *args: Any) -> bool:
        return await self._store.write_async(change, *args)
