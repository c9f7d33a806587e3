"""Retention: a closed or merged pull request's review content is purged after the delay;
the ledger — and so every budget window — is left exactly as it was."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from service.app.retention import delay_of, sweep
from service.config.connections import ENV_PRIVATE_KEY, ENV_WEBHOOK_SECRET
from service.config.errors import ConfigError
from service.config.schema import RetentionConfig
from service.config.validate import parse_config
from service.engine.base import Description
from service.intake.rules.decisions import Close
from service.publish.retry import republish_pending
from service.publish.run_content import AskAnswer, Omitted
from tests.publisher_rig import (
    ANCHORED,
    REPO,
    UNANCHORED,
    Rig,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)
from tests.queue_helpers import apply_one
from tests.simulator.harness import app_key_pair

LEDGER_SUMS = """
SELECT COUNT(*), SUM(used_tokens), SUM(reserved_tokens),
       SUM(COALESCE(used_tokens, reserved_tokens)), SUM(cost_usd)
  FROM ledger
"""



def close(rig: Rig, number: int, *, merged: bool = True) -> None:
    """What both ingest paths do when they see the pull request close."""
    with rig.store.transaction() as conn:
        apply_one(conn, Close(repo=REPO, pr_number=number, merged=merged),
                       now=rig.now())


def ledger_state(rig: Rig) -> tuple[object, ...]:
    with rig.store.read() as conn:
        conn.row_factory = sqlite3.Row
        try:
            rows = [tuple(r) for r in conn.execute("SELECT * FROM ledger ORDER BY id")]
            sums = tuple(conn.execute(LEDGER_SUMS).fetchone())
            hours = tuple(tuple(r) for r in conn.execute(
                "SELECT * FROM ledger_hours ORDER BY hour"))
        finally:
            conn.row_factory = None
    windows = tuple((w.name, w.spent, w.reserved, w.remaining)
                    for w in rig.governor.snapshot(rig.now()).windows)
    return rows, sums, hours, windows


@pytest.mark.anyio
async def test_closing_purges_content_after_the_delay_and_never_touches_the_ledger(
        rig: Rig) -> None:
    closing, staying = rig.add_pull(), rig.add_pull()
    review = rig.record(rig.opened(closing), findings=(ANCHORED, UNANCHORED),
                        omitted=(Omitted("a.lock", "excluded", 3, "*.lock"),))
    describe = rig.record(rig.ask(closing, command="describe"),
                          description=Description("T", "S", ("c",)))
    asked = rig.record(rig.ask(closing, command="ask"),
                       answer=AskAnswer(question="@claude ask why?", text="Because."))
    kept = rig.record(rig.opened(staying), findings=(UNANCHORED,))
    publisher = rig.publisher()
    for run in (review, describe, asked, kept):
        await publisher.publish_key(run.dedupe_key)
    rig.advance(hours=1)
    close(rig, closing.number)
    before = ledger_state(rig)

    rig.advance(hours=1, minutes=59)
    assert sweep(rig.store, rig.now(), timedelta(hours=2)) == 0  # the delay has not passed
    rig.advance(minutes=1)
    assert sweep(rig.store, rig.now(), timedelta(hours=2)) == 3

    purged = rig.run_row(review.dedupe_key)
    assert (purged["findings"], purged["omitted"], purged["assessment"]) == ("[]", "[]", None)
    assert purged["description"] is None and purged["content_purged_at"] is not None
    assert purged["publish_outcome"] == "published" and purged["comment_id"] is not None
    described = rig.run_row(describe.dedupe_key)
    assert described["description"] == "{}" and described["content_purged_at"] is not None
    answered = rig.run_row(asked.dedupe_key)
    assert answered["answer"] == "{}" and answered["description"] is None
    assert purged["answer"] is None
    untouched = rig.run_row(kept.dedupe_key)
    assert untouched["content_purged_at"] is None and "helper is long" in untouched["findings"]
    closed = rig.row("closed_pull_requests", "pr_number = ?", closing.number)
    assert closed["purged_at"] is not None

    assert ledger_state(rig)[:3] == before[:3]
    assert rig.rows("agent_comments")  # what the App said is never forgotten
    assert sweep(rig.store, rig.now(), timedelta(hours=2)) == 0  # idempotent


@pytest.mark.anyio
async def test_a_run_finishing_after_the_close_is_purged_and_one_after_a_reopen_is_kept(
        rig: Rig) -> None:
    pr = rig.add_pull()
    late = rig.claim(rig.opened(pr))  # started before the close
    rig.advance(minutes=5)
    close(rig, pr.number)
    assert sweep(rig.store, rig.now(), timedelta(0)) == 0  # nothing recorded yet
    rig.advance(minutes=5)
    late_run = rig.complete(late, findings=(UNANCHORED,))
    rig.advance(minutes=5)
    # Reopened, and asked again: this run belongs to the pull request's new life.
    after = rig.record(rig.ask(pr), findings=(UNANCHORED,))
    before = ledger_state(rig)
    assert sweep(rig.store, rig.now(), timedelta(0)) == 1
    assert rig.run_row(late_run.dedupe_key)["content_purged_at"] is not None
    assert rig.run_row(after.dedupe_key)["content_purged_at"] is None
    assert ledger_state(rig) == before

    rig.advance(hours=1)
    close(rig, pr.number, merged=False)  # closed again: now everything before it goes
    assert sweep(rig.store, rig.now(), timedelta(0)) == 1
    assert rig.run_row(after.dedupe_key)["content_purged_at"] is not None


@pytest.mark.anyio
async def test_a_purged_run_is_never_published(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.opened(pr), findings=(ANCHORED,))  # not published yet
    close(rig, pr.number)
    assert sweep(rig.store, rig.now(), timedelta(0)) == 1
    publisher = rig.publisher()
    assert await republish_pending(rig.store, publisher, rig.now()) == 0
    assert (await publisher.publish_key(run.dedupe_key)).status == "skipped"
    assert rig.reviews(pr) == []


def test_the_delay_comes_from_the_retention_config(tmp_path: Path) -> None:
    assert delay_of(RetentionConfig()) == timedelta(0)
    assert delay_of(RetentionConfig(delay_hours=48)) == timedelta(hours=48)
    assert delay_of(RetentionConfig(purge_after_close=False, delay_hours=5)) is None
    private_pem, _ = app_key_pair()
    env = {ENV_PRIVATE_KEY: private_pem, ENV_WEBHOOK_SECRET: "s3cret-hook"}
    data: dict[str, object] = {
        "github": {"app_id": 1}, "triggers": {},
        "budget": {"session_tokens": 88000, "weekly_tokens": 1500000, "max_run_tokens": 30000},
        "retention": {"delay_hours": 24},
    }
    assert parse_config(data, env, tmp_path).retention == RetentionConfig(delay_hours=24)
    data["retention"] = {"delay_hours": -1}
    with pytest.raises(ConfigError) as caught:
        parse_config(data, env, tmp_path)
    assert caught.value.problems == ["retention.delay_hours: must be at least 0, got -1"]
    with pytest.raises(ValueError, match="negative"):
        sweep(None, None, timedelta(hours=-1))  # type: ignore[arg-type]
