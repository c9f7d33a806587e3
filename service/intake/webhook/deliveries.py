"""Webhook deliveries into the store: one transaction records a batch and what it asks for.

The webhook route (``service.intake.webhook.receiver``) checks size, signature and headers and
hands each delivery here as ``Received`` (raw body; delivery.py has one delivery's types), by way of
``service.intake.webhook.group_commit``, which gathers them into batches. ``DeliveryLog`` parses
the bodies, skips a delivery id already recorded (a redelivery), and otherwise records the
delivery in ``deliveries`` together with its effect, in the same transaction:

- ``ping``: nothing else;
- ``installation`` / ``installation_repositories``: the ``repositories`` table
  (``service.intake.webhook.installations``), reported back as an ``InstallationChange``;
- anything else: the trigger rules' decision
  (``service.intake.rules.classify.classify_event``) applied to the queue through
  ``service.intake.ingest.apply_decisions``, the seam shared with the poller, so an event
  seen by both paths becomes one queue row.

A batch is written either on the event loop in a transaction left open for group commit
to commit (``stage``: the SQLite file, when its write lock is free at once), or wholly on
a worker thread (``receive_batch``); the statements are the same. A
crash or a failure before COMMIT leaves neither the delivery nor its effect, and a
delivery is logged only once its commit is done. A body that cannot be parsed is that
delivery's own 400, and a delivery that fails on its own is retried alone, so that
neither can fail the others of its batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from service.github.payload import PayloadError
from service.intake.ingest import Decided, apply_decisions
from service.intake.rules.classify import classify_event
from service.intake.rules.decisions import Close, Decision, Decline, Enqueue, Ignore, TriggerContext
from service.intake.webhook.delivery import Delivery, Received, Result, outcome_of, sql_id
from service.intake.webhook.installations import (
    InstallationChange,
    MalformedInstallation,
    change_repositories,
)
from service.storage import agent_comments, deliveries
from service.storage.database import Database, OpenTransaction, Transaction
from service.storage.errors import STORE_ERRORS as _STORE_ERRORS
from service.storage.errors import StoreClosedError, is_contention, is_unavailable

__all__ = [
    "ON_LOOP_BYTES",
    "STORE_ERRORS",
    "DeliveryLog",
    "InstallationChange",
    "StagedDeliveries",
]

log = logging.getLogger(__name__)

#: What a store outage looks like from here (answered 503 by the receiver).
STORE_ERRORS: Final[tuple[type[Exception], ...]] = (*_STORE_ERRORS, OSError)
#: A batch with a body bigger than this is parsed and written on a worker thread.
ON_LOOP_BYTES: Final = 256 * 1024

class _Parsed:
    """A batch's bodies parsed: 400 answers for those that are not payloads, a slot each
    for the rest, filled once they are written."""

    def __init__(self, batch: Sequence[Received]) -> None:
        self._outcomes: list[Result | Exception | None] = []
        self.items: list[tuple[int, Delivery]] = []
        self._refused: list[tuple[Received, str]] = []
        for received in batch:
            try:
                self.items.append((len(self._outcomes), received.parse()))
                self._outcomes.append(None)
            except PayloadError as exc:
                self._refused.append((received, str(exc)))
                self._outcomes.append(Result(400, "unparseable", received.delivery_id,
                                             error=f"unparseable body: {exc}"))

    @property
    def deliveries(self) -> list[Delivery]:
        return [delivery for _, delivery in self.items]

    def fill(self, outcomes: Sequence[Result | Exception]) -> None:
        for (index, _), outcome in zip(self.items, outcomes, strict=True):
            self._outcomes[index] = outcome

    def log(self) -> list[Result | Exception]:
        """Log what became of each delivery (once its commit is done); the outcomes."""
        for received, error in self._refused:
            log.warning("webhook refused: unparseable body", extra={
                "delivery_id": received.delivery_id, "event": received.event,
                "error": error})
        outcomes: list[Result | Exception] = []
        for outcome in self._outcomes:
            if outcome is None:  # pragma: no cover - every parsed delivery is filled
                raise RuntimeError("a delivery of the batch has no outcome")
            outcomes.append(outcome)
        for index, delivery in self.items:
            outcome = self._outcomes[index]
            if isinstance(outcome, Result):
                log.info("webhook delivery", extra={
                    **delivery.log_fields(), "outcome": outcome.outcome,
                    "enqueued": outcome.enqueued})
        return outcomes


class StagedDeliveries:
    """A batch written in a transaction still open, as ``DeliveryLog.stage`` leaves it
    (a ``service.intake.webhook.group_commit.Staged``)."""

    def __init__(self, parsed: _Parsed, transaction: OpenTransaction | None) -> None:
        self._parsed = parsed
        self._transaction = transaction

    def commit(self) -> None:
        """COMMIT: the WAL sync. Blocking; rolls back if it fails."""
        if self._transaction is not None:
            self._transaction.commit()

    def committed(self) -> list[Result | Exception]:
        return self._parsed.log()

    def failed(self, exc: Exception) -> list[Result | Exception]:
        self._parsed.fill([exc] * len(self._parsed.items))
        return self._parsed.log()


class DeliveryLog:
    """Records deliveries and carries out what they ask.

    Two ways to write a batch, the same effect: ``stage`` on the event loop, for a batch
    that can take the write lock at once (``service.intake.webhook.group_commit`` then commits
    it), and ``receive_batch`` on a worker thread, which waits for the lock and commits
    itself. The trigger rules run inside the transaction, so their
    ``agent_comments`` lookup (``store.read()``) reads through it.
    """

    def __init__(self, store: Database, triggers: Callable[[], TriggerContext]) -> None:
        self._store = store
        self._triggers = triggers

    def stage(self, batch: Sequence[Received]) -> StagedDeliveries | None:
        """Parse and write ``batch`` in a transaction begun without waiting, left open.

        Never blocks: None (nothing done) when the store cannot begin at once (another
        connection holds the write lock, or the store is a server, whose every statement
        would hold the loop for a round trip), and also when writing failed, so that
        ``receive_batch`` writes the batch instead and, if one delivery is at fault, fails
        only that one. A batch with a body over ``ON_LOOP_BYTES`` goes that way too:
        parsing it would hold up the loop.
        """
        if any(len(received.body) > ON_LOOP_BYTES for received in batch):
            return None
        parsed = _Parsed(batch)
        if not parsed.items:
            return StagedDeliveries(parsed, None)
        transaction = self._store.try_begin()
        if transaction is None:
            return None
        try:
            with transaction.using() as conn:
                parsed.fill(self._write_in(conn, parsed.deliveries))
        except Exception:
            transaction.rollback()
            return None
        return StagedDeliveries(parsed, transaction)

    def receive_batch(self, batch: Sequence[Received]) -> list[Result | Exception]:
        """Parse, write and commit ``batch``, waiting for the write lock. Blocking.

        An unparseable body is a 400 result, recorded nowhere. If the transaction fails,
        every parsed delivery of the batch gets its exception.
        """
        parsed = _Parsed(batch)
        if parsed.items:
            try:
                parsed.fill(self._ingest(parsed.deliveries))
            except Exception as exc:
                parsed.fill([exc] * len(parsed.items))
        return parsed.log()

    def _ingest(self, batch: Sequence[Delivery]) -> list[Result | Exception]:
        """Several deliveries in one transaction: one COMMIT (one WAL sync) for the lot.

        Raises when the transaction cannot be had or kept (contention past the busy
        timeout, a closed store): none was recorded. If one delivery fails otherwise, the
        batch is rolled back and each delivery written alone, so only that one gets its
        exception.
        """
        try:
            return list(self._write(batch))
        except Exception as exc:
            if (len(batch) == 1 or is_contention(exc) or is_unavailable(exc)
                    or isinstance(exc, StoreClosedError)):
                raise  # not one delivery's fault: writing each alone would fail the same
        outcomes: list[Result | Exception] = []
        for item in batch:
            try:
                outcomes.extend(self._write([item]))
            except Exception as alone:
                outcomes.append(alone)
        return outcomes

    def _write(self, batch: Sequence[Delivery]) -> list[Result]:
        with self._store.transaction() as conn:
            return self._write_in(conn, batch)

    def _write_in(self, conn: Transaction, batch: Sequence[Delivery]) -> list[Result]:
        # A few statements per batch, not per delivery: one SELECT for the batch's ids, the
        # queue's few for all its decisions (``apply_decisions``), one INSERT for the rows.
        seen = deliveries.seen(conn, [delivery.delivery_id for delivery in batch])
        # Whether each comment is the App's own, read once for the batch rather than once
        # per comment delivery by the rules (on a server, one round trip instead of many).
        context = replace(self._triggers(), agent_comments=agent_comments.ours(
            conn, filter(None, (delivery.comment_id for delivery in batch))))
        results: list[Result | None] = []
        recorded: list[tuple[int, Delivery]] = []
        triggered: list[tuple[int, Delivery, Decision]] = []
        for delivery in batch:
            index = len(results)
            if delivery.delivery_id in seen:  # recorded before, or earlier in this batch
                results.append(Result(200, "duplicate", delivery.delivery_id))
                continue
            seen.add(delivery.delivery_id)
            recorded.append((index, delivery))
            if delivery.event == "ping":
                results.append(Result(200, "ping", delivery.delivery_id))
            elif delivery.event in ("installation", "installation_repositories"):
                results.append(self._installation(conn, delivery))
            else:
                results.append(None)  # known once the batch's decisions are applied
                triggered.append((index, delivery, self._classify(delivery, context)))
        if triggered:
            decided = [Decided(decision, delivery.received_at)
                       for _, delivery, decision in triggered]
            for (index, delivery, decision), applied in zip(
                    triggered, apply_decisions(conn, decided), strict=True):
                results[index] = outcome_of(delivery.delivery_id, decision, applied)
        done = [result for result in results if result is not None]
        if len(done) != len(results):  # pragma: no cover - every slot is filled above
            raise RuntimeError("a delivery of the batch has no result")
        deliveries.record(conn, [
            deliveries.DeliveryRow(delivery.delivery_id, delivery.event, delivery.action,
                                   delivery.installation_id, delivery.received_at,
                                   done[index].outcome)
            for index, delivery in recorded])
        return done

    def _classify(self, delivery: Delivery, context: TriggerContext) -> Decision:
        try:
            decision = classify_event(delivery.event, delivery.payload, context)
        except STORE_ERRORS:
            raise
        except Exception as exc:
            # classify_event promises not to raise; if a rule does anyway, the delivery is
            # still answered (and recorded) rather than failed: the poller is the backstop.
            log.exception("trigger rules failed on a delivery",
                          extra={"delivery_id": delivery.delivery_id})
            return Ignore("malformed_payload", f"the rules failed ({type(exc).__name__})")
        if isinstance(decision, Close):
            # GitHub signs a delivery's body, not its id or when it was sent: a captured
            # ``closed`` delivery sent again under a new id would cancel waiting requests
            # and purge reviews of an open pull request. A close is the poller's to record,
            # from GitHub's own listing; meanwhile a claim reads the pull request first and
            # settles a closed one at zero.
            return Ignore("closed_by_poller", f"{decision.repo}#{decision.pr_number}")
        # The rules check that ids are positive, not that they fit a 64-bit column.
        ids: tuple[int, ...]
        if isinstance(decision, Enqueue):
            job = decision.job
            ids = (job.pr_number, job.actor_id, job.comment_id or 1)
        elif isinstance(decision, Decline):
            ids = (decision.pr_number, decision.reply_to)
        else:
            return decision
        if any(sql_id(i) is None for i in ids):
            return Ignore("malformed_payload", "an id does not fit in 64 bits")
        return decision

    def _installation(self, conn: Transaction, delivery: Delivery) -> Result:
        try:
            change = change_repositories(
                conn, delivery.event, delivery.payload, action=delivery.action,
                installation_id=delivery.installation_id, at=delivery.received_at)
            ignored = None if change is not None else f"action:{delivery.action}"
        except MalformedInstallation as exc:
            log.warning("installation delivery not understood",
                        extra={"delivery_id": delivery.delivery_id, "error": str(exc)})
            change, ignored = None, "malformed_payload"
        if change is None:
            return Result(202, f"ignored:{ignored}", delivery.delivery_id, ignored=ignored)
        return Result(202, f"{delivery.event}:{change.action}:"
                           f"added={len(change.added)},removed={len(change.removed)}",
                      delivery.delivery_id, change=change)
