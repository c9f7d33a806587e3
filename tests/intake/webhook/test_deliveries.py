"""``DeliveryLog``: a batch of deliveries parsed, recorded with what each asks for, and
committed in one transaction, on both backends (``receive_batch``, on a worker thread);
and on the SQLite file, written on the event loop's side and committed elsewhere
(``stage``)."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from service.config.schema import TriggersConfig
from service.intake.rules.decisions import TriggerContext
from service.intake.webhook.deliveries import ON_LOOP_BYTES, DeliveryLog
from service.intake.webhook.delivery import Received, Result
from service.storage.agent_comments import AgentComments
from service.storage.database import Database
from service.storage.postgres import PostgresStore
from service.storage.sqlite import SqliteStore
from tests import payloads as p
from tests.databases import throwaway_database
from tests.kit.stores import new_sqlite_store

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def deliveries_log(store: Database) -> DeliveryLog:
    context = TriggerContext(TriggersConfig(), 4242, "review-agent", AgentComments(store))
    return DeliveryLog(store, lambda: context)


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

    def classify(delivery: object, context: object) -> object:
        if getattr(delivery, "delivery_id", "") == "d-2":
            raise ValueError("this delivery's own fault")
        return real(delivery, context)  # type: ignore[arg-type]

    monkeypatch.setattr(log, "_classify", classify)
    outcomes = log.receive_batch([opened_pr(1, "d-1"), opened_pr(2, "d-2"),
                                  opened_pr(3, "d-3")])
    assert isinstance(outcomes[1], ValueError)
    assert [o.outcome for o in (outcomes[0], outcomes[2]) if isinstance(o, Result)] == [
        "enqueued", "enqueued"]
    assert count(database, "deliveries") == 2


# -- stage: the event loop's side (the SQLite file) ------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    with new_sqlite_store(tmp_path / "state.db", busy_timeout=30) as opened:
        yield opened


def committed_rows(store: SqliteStore, table: str) -> int:
    with sqlite3.connect(store.path) as other:
        return int(other.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def test_a_staged_batch_is_written_but_not_committed_or_logged_until_its_commit(
        store: SqliteStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="service.intake.webhook.deliveries")
    log = deliveries_log(store)
    batch = [opened_pr(1, "d-1"), opened_pr(2, "d-2"),
             Received("d-bad", "pull_request", b"{not json", None, NOW)]

    staged = log.stage(batch)

    assert staged is not None
    assert committed_rows(store, "deliveries") == 0 and committed_rows(store, "queue") == 0
    assert caplog.records == []
    threading.Thread(target=staged.commit).start()  # the sync happens on another thread
    outcomes = _wait_committed(store, staged)
    assert [o.status for o in outcomes if isinstance(o, Result)] == [202, 202, 400]
    assert committed_rows(store, "deliveries") == 2 and committed_rows(store, "queue") == 2
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("webhook delivery") == 2
    assert messages.count("webhook refused: unparseable body") == 1


def _wait_committed(store: SqliteStore, staged: object) -> list[Result | Exception]:
    for _ in range(500):
        if committed_rows(store, "deliveries"):
            break
        threading.Event().wait(0.01)
    return list(staged.committed())  # type: ignore[attr-defined]


def test_stage_does_not_wait_for_another_writer(store: SqliteStore) -> None:
    log = deliveries_log(store)
    with sqlite3.connect(store.path, isolation_level=None) as other:
        other.execute("BEGIN IMMEDIATE")
        assert log.stage([opened_pr(1, "d-1")]) is None
        other.execute("ROLLBACK")

    assert log.receive_batch([opened_pr(1, "d-1")])[0].status == 202  # type: ignore[union-attr]


def test_a_batch_with_a_big_body_is_left_to_the_blocking_path(store: SqliteStore) -> None:
    log = deliveries_log(store)
    payload = p.pull_request_event("opened", p.pull_request(3, head_sha="c" * 40))
    payload["padding"] = "x" * ON_LOOP_BYTES
    big = Received("d-big", "pull_request", json.dumps(payload).encode(), None, NOW)

    assert log.stage([opened_pr(1, "d-1"), big]) is None
    assert committed_rows(store, "deliveries") == 0


def test_a_batch_that_fails_is_rolled_back_and_left_to_the_blocking_path(
        store: SqliteStore) -> None:
    log = deliveries_log(store)
    with store.transaction() as conn:
        conn.execute("CREATE TRIGGER fail_bad AFTER INSERT ON deliveries"
                     " WHEN NEW.delivery_id = 'bad'"
                     " BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    batch = [opened_pr(1, "ok"), opened_pr(2, "bad")]

    assert log.stage(batch) is None
    assert committed_rows(store, "queue") == 0
    free = store.try_begin()  # rolled back: the no-wait transaction is free again
    assert free is not None
    free.rollback()

    outcomes = log.receive_batch(batch)  # where one delivery at fault fails alone
    assert isinstance(outcomes[0], Result) and outcomes[0].status == 202
    assert isinstance(outcomes[1], sqlite3.IntegrityError)


def test_a_failed_commit_fails_the_written_deliveries_and_not_the_refused(
        store: SqliteStore) -> None:
    log = deliveries_log(store)
    staged = log.stage([opened_pr(1, "d-1"),
                        Received("d-bad", "pull_request", b"[]", None, NOW)])
    assert staged is not None
    staged.commit()  # (committed here only to end the transaction)

    outcomes = staged.failed(OSError("disk I/O error"))

    assert isinstance(outcomes[0], OSError)
    assert isinstance(outcomes[1], Result) and outcomes[1].status == 400


def test_a_batch_with_nothing_to_write_takes_no_transaction(store: SqliteStore) -> None:
    log = deliveries_log(store)
    holder = store.try_begin()  # if stage needed one, it could not have it
    assert holder is not None

    staged = log.stage([Received("d-bad", "ping", b"", None, NOW)])

    assert staged is not None
    staged.commit()
    [outcome] = staged.committed()
    assert isinstance(outcome, Result) and outcome.status == 400
    holder.rollback()


def test_on_a_database_server_a_batch_is_never_written_on_the_loop() -> None:
    # Each statement would hold the event loop for a round trip: the batch is left to the
    # blocking path, which writes and commits it on a worker thread.
    with throwaway_database() as conninfo, PostgresStore(conninfo) as store:
        log = deliveries_log(store)
        assert log.stage([opened_pr(1, "d-1")]) is None
        [result] = log.receive_batch([opened_pr(1, "d-1")])
        assert isinstance(result, Result) and result.outcome == "enqueued"
