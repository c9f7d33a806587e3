"""Builders shared by the queue and budget tests."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.config.schema import BudgetConfig
from service.intake.ingest import Applied, Decided, apply_decisions
from service.intake.rules.decisions import Decision
from service.model.jobs import Job
from service.storage.database import Database, Transaction
from service.storage.errors import STORE_ERRORS, is_contention
from service.storage.queue import Claim
from service.storage.sqlite import SqliteStore
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=20)


def opened(pr: int, sha: str = "a" * 40, repo: str = "o/r", actor: int = 7) -> Job:
    return Job(kind="pr_opened", repo=repo, pr_number=pr, actor_id=actor, head_sha=sha)


def mention(pr: int, comment: int, repo: str = "o/r", actor: int = 9,
            command: str = "review") -> Job:
    return Job(kind="mention", repo=repo, pr_number=pr, actor_id=actor, comment_id=comment,
               comment_source="issue", command=command)  # type: ignore[arg-type]


def budget(**overrides: object) -> BudgetConfig:
    values: dict[str, object] = {
        "enabled": True, "session_tokens": 1_000_000, "weekly_tokens": 7_000_000,
        "max_run_tokens": 10_000, "reviewer_share_pct": 100,
    }
    values.update(overrides)
    return BudgetConfig(**values)  # type: ignore[arg-type]


def open_store(tmp_path: Path, name: str = "state.db") -> SqliteStore:
    return new_sqlite_store(tmp_path / name)


def apply_one(conn: Transaction, decision: Decision, *,
              now: datetime) -> Applied:
    """One decision through the ingest seam both paths share (``apply_decisions``)."""
    return apply_decisions(conn, [Decided(decision, now)])[0]


#: A check run inside each admitted claim's transaction: the violations it finds.
AdmitCheck = Callable[[Transaction, Claim, datetime], list[str]]


def drain_racing(open_store: Callable[[], Database], config: BudgetConfig,
                 check: AdmitCheck, *, threads: int = 4,
                 now: datetime = T0 + timedelta(minutes=1)) -> list[str]:
    """``threads`` real threads, each with its own connection, queue and governor, claim
    (at ``now``) until nothing is claimable; each admission is checked by ``check`` in
    its own transaction. Returns the violations; raises the first error a thread met."""
    violations: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def worker(w: int) -> None:
        try:
            with open_store() as own:
                q, gov = QueueDriver(own, lease=LEASE), Governor(own, config)

                def checked(conn: Transaction, claim: Claim, at: datetime) -> bool:
                    ok = gov.admit(conn, claim, at)
                    if ok:
                        violations.extend(check(conn, claim, at))
                    return ok

                barrier.wait()
                while True:
                    try:
                        if q.claim(now=now, owner=f"w{w}", admit=checked) is None:
                            return
                    except STORE_ERRORS as exc:
                        if not is_contention(exc):
                            raise  # contention is retried; anything else is a failure
        except BaseException as exc:  # surfaced below, not lost in the thread
            errors.append(exc)

    running = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    if errors:
        raise errors[0]
    return violations


@pytest.fixture(name="store")
def both_backends_store(database: Database) -> Database:
    """The store a queue test runs on: SQLite, then PostgreSQL (``database``)."""
    return database


@pytest.fixture(name="queue")
def both_backends_queue(store: Database) -> QueueDriver:
    """The queue over ``store``, with leases of ``LEASE``."""
    return QueueDriver(store, lease=LEASE)
