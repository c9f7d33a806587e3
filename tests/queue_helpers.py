"""Builders shared by the queue and budget tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from service.config import BudgetConfig
from service.ingest import Applied, Decided, apply_decisions
from service.jobs import Job
from service.storage import SqliteStore, Transaction
from service.storage.queue import ReviewQueue
from service.triggers import Decision

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
    return SqliteStore(tmp_path / name)


def apply_one(conn: Transaction, queue: ReviewQueue, decision: Decision, *,
              now: datetime) -> Applied:
    """One decision through the ingest seam both paths share (``apply_decisions``)."""
    return apply_decisions(conn, queue, [Decided(decision, now)])[0]
