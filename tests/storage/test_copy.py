"""``migrate --from state.db --to postgresql://…``: every row of a real SQLite store lands in
an empty PostgreSQL database, verified, and the budget reads the same there."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from psycopg.conninfo import make_conninfo

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.cli.main import main
from service.model.etags import Validators
from service.storage import agent_comments, closures, notices, repositories, runs
from service.storage.copy import COPIED, CopyError, copy_store
from service.storage.etags import StoredETags
from service.storage.postgres import PostgresStore
from service.storage.sqlite import SqliteStore
from service.storage.watermarks import Watermarks
from tests.databases import as_url, private_cluster, throwaway_database
from tests.kit.queue import QueueDriver
from tests.queue_helpers import budget, mention, opened

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def fill(store: SqliteStore) -> None:
    """A store that has lived: runs paid for and settled, one left open, every table used."""
    queue, governor = QueueDriver(store), Governor(store, budget(), clock=lambda: T0)
    for n in range(1, 6):
        queue.enqueue(opened(n, sha=f"{n:040x}"), now=T0 + timedelta(minutes=n))
    queue.enqueue(mention(9, 901), now=T0 + timedelta(minutes=7))
    for n in range(4):
        now = T0 + timedelta(minutes=10 + n)
        claim = queue.claim(now=now, owner=f"w{n}", admit=governor.admit,
                            lapsed=governor.close_lapsed)
        assert claim is not None
        if n < 3:  # the last one stays open: a reservation in flight
            governor.settle(claim, Usage(tokens=1000 + n, confidence="exact", engine="e",
                                         model="m", cost_usd=0.01 * (n + 1)), now=now)
            queue.finish(claim.dedupe_key, claim.lease.owner)
    Watermarks(store).advance("pull_requests:o/r", T0)
    StoredETags(store).put_validators("GET /repos/o/r/pulls", Validators('W/"1"', "Mon"))
    with store.transaction() as tx:
        repositories.add(tx, "o/r", 42, T0)
        agent_comments.remember(tx, "o/r", [555, 556], T0)
        closures.record_close(tx, "o/r", 5, merged=True, at=T0)
        notices.claim(tx, "mention:o/r:9:901", "budget:exhausted", T0)
        runs.insert(tx, runs.RunRow(
            dedupe_key=f"pr_opened:o/r:1:{1:040x}", repo="o/r", pr_number=1,
            head_sha=f"{1:040x}", outcome="completed", findings='[{"title": "é"}]',
            recorded_at=T0, omitted="[]", assessment=None, description=None))


@pytest.fixture
def target() -> Iterator[str]:
    with throwaway_database() as conninfo:
        yield conninfo


def test_every_row_is_copied_and_the_budget_reads_the_same(tmp_path: Path, target: str) -> None:
    with SqliteStore(tmp_path / "state.db") as source, PostgresStore(target) as pg:
        fill(source)
        copied = copy_store(source, pg)
        assert {table for table, _ in COPIED} == set(copied.rows)
        assert copied.rows["ledger"] == 4 and copied.rows["queue"] == 6
        later = T0 + timedelta(hours=1)
        assert (Governor(pg, budget(), publish=False).snapshot(later)
                == Governor(source, budget(), publish=False).snapshot(later))
        # The next reservation continues the ledger's ids.
        claim = QueueDriver(pg).claim(now=later, owner="w9",
                                      admit=Governor(pg, budget()).admit)
        assert claim is not None
        with pg.read() as tx:
            assert tx.execute("SELECT MAX(id) FROM ledger").fetchone()[0] == 5


def test_a_target_that_holds_rows_is_refused_and_left_alone(tmp_path: Path,
                                                             target: str) -> None:
    with SqliteStore(tmp_path / "state.db") as source, PostgresStore(target) as pg:
        fill(source)
        copy_store(source, pg)
        with pytest.raises(CopyError, match="not empty"):
            copy_store(source, pg)
        with pg.read() as tx:
            assert tx.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] == 4


def test_the_command_copies_and_says_what(tmp_path: Path, target: str) -> None:
    path = tmp_path / "state.db"
    with SqliteStore(path) as source:
        fill(source)
    url, _ = as_url(target)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["migrate", "--from", str(path), "--to", url]) == 0
    assert out.getvalue().endswith(f"{path} -> {url}: 19 row(s) copied and verified\n")
    assert "  ledger: 4 row(s)\n" in out.getvalue()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["migrate", "--from", str(path), "--to", url]) == 1
    assert "nothing copied: the target is not empty" in err.getvalue()
    with redirect_stdout(out), redirect_stderr(err):
        assert main(["migrate", "--from", str(tmp_path / "none.db"), "--to", url]) == 2
        assert main(["migrate", "--store", str(path), "--to", url]) == 2


def test_the_command_reads_the_password_from_a_file_and_never_prints_it(
        tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SqliteStore(path) as source:
        fill(source)
    secret = "s3cret-for-the-copy"
    with private_cluster(password=secret) as cluster:
        url, _ = as_url(make_conninfo(cluster.conninfo, dbname="postgres"))
        (tmp_path / "pg-password").write_text(secret + "\n")
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            refused = main(["migrate", "--from", str(path), "--to", url])
            missing = main(["migrate", "--from", str(path), "--to", url,
                            "--password-file", str(tmp_path / "nowhere")])
            copied = main(["migrate", "--from", str(path), "--to", url,
                           "--password-file", str(tmp_path / "pg-password")])
    assert refused == 1 and "password" in err.getvalue()  # the server asked for one
    assert missing == 2 and f"--password-file: No such file or directory: {tmp_path}" in (
        err.getvalue())
    assert copied == 0 and "19 row(s) copied and verified" in out.getvalue()
    assert secret not in out.getvalue() + err.getvalue()
