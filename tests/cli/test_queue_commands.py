"""``pr-review-agent queue …`` and ``runs …``: a stuck row or a failed post fixed with one
command, through the same storage code as the service, and refused where the service owns
the row."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.cli.main import main
from service.storage import queue as queue_table
from service.storage import runs
from service.storage.database import Database
from service.storage.sqlite import SqliteStore
from tests.kit.paths import CHECKOUT
from tests.kit.queue import QueueDriver
from tests.queue_helpers import mention, opened

NOW = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
KEY = "pr_opened:o/r:1:" + "a" * 40


@pytest.fixture(name="config")
def config_fixture(tmp_path: Path) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp_path / "app.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (tmp_path / "hook").write_text("whsec-queue-cli")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({
        "github": {"app_id": 1, "private_key_file": "app.pem", "webhook_secret_file": "hook"},
        "store": {"path": "state.db"}, "triggers": {},
        "budget": {"session_tokens": 100_000, "weekly_tokens": 1_400_000,
                   "max_run_tokens": 10_000}}))
    return path


def store_of(config: Path) -> SqliteStore:
    return SqliteStore(config.parent / "state.db")


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def abandon(queue: QueueDriver, key: str) -> None:
    """Use every attempt of ``key`` (each worker died), so the next claim abandons it."""
    at = NOW
    for attempt in range(queue.max_attempts):
        claim = queue.claim(now=at, owner=f"w{attempt}")
        assert claim is not None and claim.dedupe_key == key
        at += queue.lease + timedelta(seconds=1)
    assert queue.claim(now=at, owner="late") is None
    row = queue.get(key)
    assert row is not None and row.status == "abandoned"


def test_a_stuck_row_is_listed_shown_and_retried_with_one_command(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with store_of(config) as store:
        queue = QueueDriver(store)
        queue.enqueue(opened(1), now=NOW)
        abandon(queue, KEY)
        queue.enqueue(mention(2, 5), now=NOW + timedelta(seconds=1))

    code, out, _ = run_cli(capsys, "queue", "list", "--config", str(config))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["STATUS", "KIND", "PULL", "REQUEST", "ATTEMPTS", "ENQUEUED",
                                "UNTIL", "OWNER", "KEY"]
    assert [line.split()[0] for line in lines[1:]] == ["pending", "abandoned"]  # newest first
    code, out, _ = run_cli(capsys, "queue", "list", "--status", "abandoned", "--json",
                           "--config", str(config))
    [row] = json.loads(out)
    assert (row["dedupe_key"], row["attempts"], row["repo"]) == (KEY, 3, "o/r")

    code, out, _ = run_cli(capsys, "queue", "show", KEY, "--config", str(config))
    assert code == 0 and "status: abandoned" in out and "attempts: 3" in out

    code, out, _ = run_cli(capsys, "queue", "retry", KEY, "--config", str(config))
    assert code == 0 and "abandoned -> pending, attempts reset" in out
    with store_of(config) as store:
        row_after = QueueDriver(store).get(KEY)
        assert row_after is not None
        assert (row_after.status, row_after.attempts, row_after.owner) == ("pending", 0, None)
        # …and the service claims it as any other pending row.
        claim = QueueDriver(store).claim(now=datetime.now(UTC), owner="worker")
        assert claim is not None and claim.dedupe_key == KEY


def test_what_the_service_owns_is_refused_with_a_reason(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with store_of(config) as store:
        queue = QueueDriver(store)
        queue.enqueue(opened(1), now=NOW)
        queue.enqueue(mention(2, 5), now=NOW)
        claim = queue.claim(now=NOW, owner="host-1:worker-0")
        assert claim is not None
        running = claim.dedupe_key
        waiting = next(r.dedupe_key for r in queue.rows(["pending"]))

    code, _, err = run_cli(capsys, "queue", "retry", running, "--config", str(config))
    assert code == 1 and "is running (owner host-1:worker-0" in err
    code, _, err = run_cli(capsys, "queue", "cancel", running, "--config", str(config))
    assert code == 1 and "is not cut short" in err
    code, _, err = run_cli(capsys, "queue", "retry", waiting, "--config", str(config))
    assert code == 0 and "already pending" in err
    code, out, _ = run_cli(capsys, "queue", "cancel", waiting, "--config", str(config))
    assert code == 0 and "pending -> cancelled" in out
    code, out, _ = run_cli(capsys, "queue", "retry", waiting, "--config", str(config))
    assert code == 0 and "cancelled -> pending" in out
    code, _, err = run_cli(capsys, "queue", "show", "no-such-key", "--config", str(config))
    assert code == 1 and "no queue row 'no-such-key'" in err
    with store_of(config) as store:
        held = QueueDriver(store).get(running)
        assert held is not None and (held.status, held.owner) == ("claimed", "host-1:worker-0")


def test_queue_list_rejects_an_unknown_status(config: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["queue", "list", "--status", "stuck", "--config", str(config)])
    assert exited.value.code == 2
    assert "invalid choice: 'stuck'" in capsys.readouterr().err


def _record(store: Database, key: str, *, failed: bool = False, dry_run: bool = False) -> None:
    with store.transaction() as tx:
        runs.insert(tx, runs.RunRow(dedupe_key=key, repo="o/r", pr_number=1,
                                    head_sha="a" * 40, outcome="completed", findings="[]",
                                    recorded_at=NOW, omitted="[]", assessment="ok",
                                    description=None))
        runs.count_attempt(tx, key)
        if failed:
            runs.fail(tx, key, NOW)
        if dry_run:
            runs.conclude(tx, key, outcome="dry_run", published_at=NOW, comment_id=None)


def test_runs_list_names_each_runs_kind(config: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with store_of(config) as store:
        queue = QueueDriver(store)
        for job in (opened(1), mention(1, 5, command="ask"), mention(1, 6)):
            queue.enqueue(job, now=NOW)
            _record(store, job.dedupe_key)
        _record(store, "mention:o/r:1:7")  # its queue row is gone
    code, out, _ = run_cli(capsys, "runs", "list", "--json", "--config", str(config))
    assert code == 0
    assert {r["dedupe_key"]: r["kind"] for r in json.loads(out)} == {
        opened(1).dedupe_key: "pr_opened", "mention:o/r:1:5": "ask",
        "mention:o/r:1:6": "review", "mention:o/r:1:7": None}
    code, out, _ = run_cli(capsys, "runs", "list", "--config", str(config))
    assert out.splitlines()[0].split()[0] == "KIND"
    assert [line.split()[0] for line in out.splitlines()[1:]].count("ask") == 1


def test_a_failed_post_and_a_dry_run_are_published_again_with_one_command(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with store_of(config) as store:
        _record(store, "k-failed", failed=True)
        _record(store, "k-dry", dry_run=True)
        _record(store, "k-posted")
        with store.transaction() as tx:
            runs.conclude(tx, "k-posted", outcome="published", published_at=NOW,
                          comment_id=77)

    code, out, _ = run_cli(capsys, "runs", "list", "--failed", "--config", str(config))
    assert code == 0 and "k-failed" in out and "k-dry" not in out
    code, out, _ = run_cli(capsys, "runs", "list", "--json", "--config", str(config))
    assert {r["dedupe_key"]: r["publish_outcome"] for r in json.loads(out)} == {
        "k-failed": None, "k-dry": "dry_run", "k-posted": "published"}

    for key, was in (("k-failed", "failed"), ("k-dry", "dry_run")):
        code, out, _ = run_cli(capsys, "runs", "republish", key, "--config", str(config))
        assert code == 0 and f"{key}: {was} -> offered again" in out
    code, _, err = run_cli(capsys, "runs", "republish", "k-posted", "--config", str(config))
    assert code == 1 and "ended published (comment 77)" in err
    code, _, err = run_cli(capsys, "runs", "republish", "k-failed", "--config", str(config))
    assert code == 0 and "waiting to be published already" in err

    with store_of(config) as store, store.read() as tx:
        now = datetime.now(UTC)
        assert sorted(runs.pending(tx, now, 10)) == ["k-dry", "k-failed"]  # the re-offer's
        (attempts,) = tx.execute(
            "SELECT publish_attempts FROM runs WHERE dedupe_key = 'k-failed'").fetchone()
        assert attempts == 0


def test_the_storage_steps_hold_on_both_backends(database: Database) -> None:
    queue = QueueDriver(database, max_attempts=1)
    queue.enqueue(opened(1), now=NOW)
    abandon(queue, KEY)
    with database.transaction() as tx:
        assert queue_table.retry(tx, KEY)
        assert not queue_table.retry(tx, KEY)  # pending now: nothing to do
        assert queue_table.cancel(tx, KEY)
        assert [r.status for r in queue_table.listing(tx, statuses=["cancelled"])] == [
            "cancelled"]
    _record(database, "k", failed=True)
    with database.transaction() as tx:
        assert runs.republish(tx, "k")
        assert not runs.republish(tx, "k")
        assert [r["dedupe_key"] for r in runs.listing(tx, repo="o/r")] == ["k"]
        assert runs.listing(tx, failed=True) == []


def test_a_listing_cut_short_by_its_reader_ends_quietly(config: Path) -> None:
    """``queue list | head -1``: the reader goes away; no traceback, the exit of a tool the
    pipe ended."""
    import os
    import subprocess
    import sys
    queue = QueueDriver(store_of(config))
    for n in range(2000):
        queue.enqueue(opened(n + 1, f"{n:040x}"), now=NOW)
    root = CHECKOUT
    reader, writer = os.pipe()
    os.close(reader)  # the reader is gone before a line is written: every write fails
    try:
        with subprocess.Popen(
                [sys.executable, "-m", "service", "queue", "list", "--config", str(config)],
                cwd=root, stdout=writer, stderr=subprocess.PIPE) as listing:
            assert listing.stderr is not None
            err = listing.stderr.read().decode()
            code = listing.wait(timeout=120)
    finally:
        os.close(writer)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert code == 141
