"""``DeliveryLog.receive_batch``: a batch of deliveries parsed, recorded with what each asks
for, and committed in one transaction; on both backends."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from service.config import TriggersConfig
from service.storage import Database
from service.storage.agent_comments import AgentComments
from service.storage.queue import ReviewQueue
from service.triggers import TriggerContext
from service.webhook.deliveries import DeliveryLog, Received, Result
from tests import payloads as p

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def deliveries_log(store: Database) -> DeliveryLog:
    context = TriggerContext(TriggersConfig(), 4242, "review-agent", AgentComments(store))
    return DeliveryLog(store, ReviewQueue(store), lambda: context)


def opened_pr(number: int, delivery_id: str) -> Received:
    payload = p.pull_request_event("opened", p.pull_request(number, head_sha=f"{number:040x}"))
    return Received(delivery_id, "pull_request", json.dumps(payload).encode(), None, NOW)


def count(store: Database, table: str) -> int:
    with store.read() as tx:
        return int(tx.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_a_batch_is_recorded_with_its_effects_in_one_go(database: Database) -> None:
    outcomes = deliveries_log(database).receive_batch(
        [opened_pr(1, "d-1"), opened_pr(2, "d-2"), opened_pr(1, "d-1")])
    assert [o.outcome for o in outcomes if isinstance(o, Result)] == [
        "enqueued", "enqueued", "duplicate"]
    assert (count(database, "deliveries"), count(database, "queue")) == (2, 2)


def nested(depth: int) -> bytes:
    return b'{"action": "opened", "x": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(("bad", "answer"), [
    # JSON's readers stop at 1 024 levels: within them it is a payload the rules ignore.
    pytest.param(nested(1000), (202, "ignored:malformed_payload"), id="nested 1000 deep"),
    pytest.param(nested(100_000), (400, "unparseable"), id="nested 100 000 deep"),
    pytest.param(b"{not json", (400, "unparseable"), id="not JSON"),
    pytest.param(b"[1, 2]", (400, "unparseable"), id="not an object"),
])
def test_a_body_that_cannot_be_read_is_its_own_answer_never_its_neighbours(
        database: Database, bad: bytes, answer: tuple[int, str],
        caplog: pytest.LogCaptureFixture) -> None:
    """A delivery that cannot be parsed is answered on its own (400, or ignored when it
    parses but says nothing the rules can read); the others of its batch are recorded as
    if it were not there, and nothing is logged with a traceback."""
    caplog.set_level(logging.INFO)
    batch = [opened_pr(1, "d-1"), Received("d-bad", "pull_request", bad, None, NOW),
             opened_pr(2, "d-2")]
    outcomes = deliveries_log(database).receive_batch(batch)
    assert all(isinstance(o, Result) for o in outcomes), outcomes
    assert [(o.status, o.outcome) for o in outcomes if isinstance(o, Result)] == [
        (202, "enqueued"), answer, (202, "enqueued")]
    assert count(database, "queue") == 2
    assert all(r.exc_info is None for r in caplog.records)


def test_a_delivery_that_fails_alone_is_written_alone(
        database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """One delivery whose write fails (not the store's fault) fails by itself: the batch
    is written again one at a time, so its neighbours are recorded."""
    log = deliveries_log(database)
    real = log._classify

    def classify(delivery: object) -> object:
        if getattr(delivery, "delivery_id", "") == "d-2":
            raise ValueError("this delivery's own fault")
        return real(delivery)  # type: ignore[arg-type]

    monkeypatch.setattr(log, "_classify", classify)
    outcomes = log.receive_batch([opened_pr(1, "d-1"), opened_pr(2, "d-2"),
                                  opened_pr(3, "d-3")])
    assert isinstance(outcomes[1], ValueError)
    assert [o.outcome for o in (outcomes[0], outcomes[2]) if isinstance(o, Result)] == [
        "enqueued", "enqueued"]
    assert count(database, "deliveries") == 2
