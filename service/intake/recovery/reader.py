"""``HookLogReader``: every minute, the App's webhook delivery log from its durable cursor,
and each failed delivery asked for again or fetched and ingested (``plan``).

One process reads it: the one that leads the ``hook_log`` election among those sharing
the store (on PostgreSQL, across hosts; ``Database.leadership``), the others standing by.
Its state is in the store — the cursor (``watermarks``: ``hook_deliveries``, forward
only) and the redeliveries asked for (``redeliveries``) — so a reader that takes over
mid-way goes on from there. A fetched delivery goes through the webhook's own seam
(``service.intake.webhook.deliveries.DeliveryLog.receive_batch``) under its guid, so a
delivery the App already answered is a duplicate there, whichever path brought it.

The cursor moves, after the steps it accounts for, to the newest attempt listed; a step
that failed (GitHub 5xx, a store fault) keeps it where it was, and the next read
re-plans the same attempts, which is harmless: settled guids are skipped. Each read
re-reads ``OVERLAP`` before the cursor, for an attempt logged late with an earlier time.
Cost: one JWT request per hundred attempts listed, plus one per step.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

import anyio

from service.github.actors import APP
from service.github.client import GitHubClient
from service.github.errors import GitHubError, NotFound, Unprocessable
from service.intake.recovery.plan import Logged, Step, logged, plan
from service.intake.webhook.delivery import Received, Result
from service.observe.metrics.instruments import Metrics
from service.storage import deliveries, redeliveries
from service.storage.database import Database, Leadership, Transaction
from service.storage.watermarks import Watermarks

__all__ = ["CURSOR", "FIRST_LOOKBACK", "OVERLAP", "HookLogReader", "ReadReport"]

log = logging.getLogger(__name__)

CURSOR: Final = "hook_deliveries"
#: A reader with no cursor yet (a new install, an upgrade) looks this far back.
FIRST_LOOKBACK: Final = timedelta(hours=1)
OVERLAP: Final = timedelta(minutes=1)
#: What ``GET /app/hook/deliveries`` answers per page, at most.
PAGE: Final = 100

Ingest = Callable[[Sequence[Received]], Awaitable[Sequence[Result | Exception]]]


@dataclass
class ReadReport:
    """One read of the log: attempts listed, pages read, what was done, what failed."""

    at: datetime
    listed: int = 0
    pages: int = 0
    redelivered: list[str] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)
    settled: int = 0
    failures: list[str] = field(default_factory=list)
    cursor: datetime | None = None
    leading: bool = True


class HookLogReader:
    """Reads the delivery log (``read_once``), every ``interval`` while leading (``run``)."""

    def __init__(self, *, client: GitHubClient, store: Database, ingest: Ingest,
                 clock: Callable[[], datetime], interval: timedelta = timedelta(minutes=1),
                 leadership: Leadership | None = None,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 metrics: Metrics | None = None) -> None:
        self._client = client
        self._metrics = metrics
        self._store = store
        self._ingest = ingest
        self._clock = clock
        self._interval = interval
        self._leadership = leadership
        self._sleep = sleep
        self._leading: bool | None = None

    def close(self) -> None:
        """Step down from leading (another process reads the log from its next turn)."""
        if self._leadership is not None:
            self._leadership.close()

    async def run(self, *, reads: int | None = None) -> None:
        """Read the log every interval until cancelled (or ``reads`` reads)."""
        done = 0
        while reads is None or done < reads:
            try:
                report = await self.read_once(self._clock())
                if report.failures:
                    log.warning("delivery log: %d step(s) failed; retried at the next read",
                                len(report.failures), extra={"failures": report.failures})
                self._count("standby" if not report.leading else
                            "failed" if report.failures else "ok", report)
            except Exception:
                log.exception("delivery log read failed; retried at the next read")
                self._count("failed", None)
            done += 1
            await self._sleep(self._interval.total_seconds())

    def _count(self, result: str, report: ReadReport | None) -> None:
        if self._metrics is not None:
            self._metrics.delivery_log_read(
                result, redelivered=len(report.redelivered) if report else 0,
                fetched=len(report.fetched) if report else 0)

    async def read_once(self, now: datetime) -> ReadReport:
        """One read: list from the cursor, plan, act, and move the cursor."""
        report = ReadReport(at=now)
        if not await self._leads():
            report.leading = False
            return report
        cursor = await self._store.run(Watermarks(self._store).get, CURSOR)
        since = (now - FIRST_LOOKBACK) if cursor is None else cursor - OVERLAP
        listed = await self._list(since, report)
        guids = sorted({a.guid for a in listed})
        taken, requested = await self._store.read_async(_known, guids)
        steps, settled = plan(listed, taken=taken, requested=requested, now=now)
        for step in steps:
            await self._act(step, now, report)
        report.settled = len(settled)
        if settled:
            await self._store.write_async(redeliveries.done, settled)
        newest = max((a.delivered_at for a in listed), default=None)
        if newest is not None and not report.failures:
            report.cursor = await self._store.run(
                Watermarks(self._store).advance, CURSOR, newest)
        if report.redelivered or report.fetched:
            log.info("delivery log: %d redelivery(ies) asked for, %d delivery(ies) fetched",
                     len(report.redelivered), len(report.fetched),
                     extra={"listed": report.listed, "pages": report.pages})
        return report

    async def _leads(self) -> bool:
        if self._leadership is None:
            return True
        leading = await self._store.run(self._leadership.lead)
        if leading != self._leading:
            log.info("delivery log reader leads" if leading else
                     "delivery log reader is standing by: another process reads it")
        self._leading = leading
        return leading

    async def _list(self, since: datetime, report: ReadReport) -> list[Logged]:
        """The attempts logged at or after ``since``, newest first (pages stop there)."""
        found: list[Logged] = []
        seen = 0
        async for item in self._client.paginate(APP, "/app/hook/deliveries",
                                                {"per_page": PAGE}):
            seen += 1
            attempt = logged(item)
            if attempt is None:
                log.warning("delivery log: an entry not shaped like GitHub's; skipped")
                continue
            if attempt.delivered_at < since:
                break
            found.append(attempt)
        report.listed, report.pages = len(found), max(1, -(-seen // PAGE))
        return found

    async def _act(self, step: Step, now: datetime, report: ReadReport) -> None:
        extra = {"delivery_id": step.guid, "log_entry": step.delivery_id}
        try:
            if step.kind == "redeliver":
                try:
                    await self._client.post_json(
                        APP, f"/app/hook/deliveries/{step.delivery_id}/attempts")
                except (Unprocessable, NotFound):
                    # GitHub will not send it again (past its window): fetch it instead.
                    step = Step("fetch", step.guid, step.delivery_id)
                else:
                    await self._store.write_async(redeliveries.requested, step.guid,
                                                  step.delivery_id, now)
                    report.redelivered.append(step.guid)
                    log.info("delivery log: asked GitHub to send a failed delivery again",
                             extra=extra)
                    return
            await self._fetch(step, now, report, extra)
        except GitHubError as exc:
            report.failures.append(f"{step.kind} {step.guid}: {exc}")
        except Exception as exc:  # a store fault: the cursor stays, the next read retries
            log.exception("delivery log: a step failed", extra=extra)
            report.failures.append(f"{step.kind} {step.guid}: {type(exc).__name__}")

    async def _fetch(self, step: Step, now: datetime, report: ReadReport,
                     extra: dict[str, object]) -> None:
        try:
            entry = await self._client.get_json(APP, f"/app/hook/deliveries/{step.delivery_id}")
        except NotFound:
            log.warning("delivery log: a failed delivery is no longer in the log; given up",
                        extra=extra)
            await self._store.write_async(redeliveries.done, [step.guid])
            return
        received = _received(step, entry, now)
        if received is None:
            log.warning("delivery log: a delivery without its request; given up", extra=extra)
            await self._store.write_async(redeliveries.done, [step.guid])
            return
        (outcome,) = await self._ingest([received])
        if isinstance(outcome, Exception):
            raise outcome
        await self._store.write_async(redeliveries.done, [step.guid])
        report.fetched.append(step.guid)
        log.info("delivery log: a failed delivery fetched and taken in",
                 extra={**extra, "outcome": outcome.outcome})


def _known(tx: Transaction, guids: Sequence[str]
           ) -> tuple[set[str], dict[str, redeliveries.Requested]]:
    """Which guids the App recorded, and every redelivery asked for and not yet in."""
    return deliveries.seen(tx, guids), redeliveries.pending(tx)


def _received(step: Step, entry: Any, now: datetime) -> Received | None:
    """The delivery as the webhook route would have received it, from its log entry."""
    request = entry.get("request") if isinstance(entry, Mapping) else None
    if not isinstance(request, Mapping) or not isinstance(request.get("payload"), Mapping):
        return None
    payload, headers = request["payload"], request.get("headers")
    named = ({str(k).lower(): v for k, v in headers.items()}
             if isinstance(headers, Mapping) else {})
    event = named.get("x-github-event") or entry.get("event")
    if not isinstance(event, str) or not event:
        return None
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    return Received(delivery_id=step.guid, event=event, body=body,
                    content_type="application/json", received_at=now)
