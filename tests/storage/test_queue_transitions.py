"""A Hypothesis state machine over enqueue, claim, settle, finish, crash and time passing.

Invariants after every step: no window over its limit; at most one open reservation per
key; no row (and no pull request) leased to two live owners; attempts never past the max.
"""

from __future__ import annotations

import tempfile
from datetime import timedelta
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from service.budget.governor import Governor
from service.budget.usage import Usage
from service.budget.windows import measure
from service.config.schema import BudgetConfig
from service.storage.queue import MAX_ATTEMPTS, Claim
from tests.kit.queue import QueueDriver
from tests.kit.stores import new_sqlite_store
from tests.kit.thorough import examples
from tests.queue_helpers import T0, mention, opened

CONFIG = BudgetConfig(enabled=True, session_tokens=30_000, weekly_tokens=420_000,
                      max_run_tokens=10_000, reviewer_share_pct=100)
LEASE = timedelta(minutes=20)
OWNERS = ("w0", "w1", "w2")


class QueueMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._dir = tempfile.TemporaryDirectory()
        self.store = new_sqlite_store(Path(self._dir.name) / "state.db")
        self.queue = QueueDriver(self.store, lease=LEASE)
        self.gov = Governor(self.store, CONFIG)
        self.now = T0
        self.held: dict[str, Claim] = {}
        self.comment = 0

    def teardown(self) -> None:
        self.store.close()
        self._dir.cleanup()

    @rule(pr=st.integers(1, 4), sha=st.sampled_from("abc"))
    def enqueue_opened(self, pr: int, sha: str) -> None:
        self.queue.enqueue(opened(pr, sha=sha * 40), now=self.now)

    @rule(pr=st.integers(1, 4))
    def enqueue_mention(self, pr: int) -> None:
        self.comment += 1
        self.queue.enqueue(mention(pr, self.comment), now=self.now)

    @rule(owner=st.sampled_from(OWNERS))
    def claim(self, owner: str) -> None:
        c = self.queue.claim(now=self.now, owner=owner, admit=self.gov.admit)
        if c is not None:
            self.held[owner] = c  # a worker that crashed and claims again forgets the old one

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data(), fraction=st.integers(0, 100), reason=st.sampled_from(
        ["completed", "truncated", "timeout", "engine_error"]))
    def settle_and_finish(self, data: st.DataObject, fraction: int, reason: str) -> None:
        owner = data.draw(st.sampled_from(sorted(self.held)))
        c = self.held.pop(owner)
        used = CONFIG.max_run_tokens * fraction // 100
        if self.gov.settle(c, Usage(used, "exact", "fake", None), now=self.now,
                           stop_reason=reason):
            self.queue.finish(c.dedupe_key, c.lease.owner)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def crash(self, data: st.DataObject) -> None:
        owner = data.draw(st.sampled_from(sorted(self.held)))
        del self.held[owner]  # reservation and lease are left behind

    @rule(minutes=st.sampled_from([1, 10, 21, 60, 301, 24 * 60 + 1]))
    def time_passes(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)

    @invariant()
    def no_window_over_its_limit(self) -> None:
        with self.store.read() as conn:
            for w in measure(conn, self.now, CONFIG):
                assert w.charged <= w.limit, (w.name, w.charged, w.limit)

    @invariant()
    def at_most_one_open_reservation_per_key(self) -> None:
        with self.store.read() as conn:
            dup = conn.execute(
                "SELECT dedupe_key FROM ledger WHERE settled_at IS NULL"
                " GROUP BY dedupe_key HAVING COUNT(*) > 1").fetchall()
        assert dup == []

    @invariant()
    def no_row_or_pull_request_leased_to_two_live_owners(self) -> None:
        live = [c for c in self.held.values() if c.lease.until > self.now]
        keys = [c.dedupe_key for c in live]
        prs = [(c.job.repo, c.job.pr_number) for c in live]
        assert len(keys) == len(set(keys))
        assert len(prs) == len(set(prs))
        for row in self.queue.rows(["claimed"]):
            assert row.leased_until is not None

    @invariant()
    def attempts_never_past_the_maximum(self) -> None:
        assert all(r.attempts <= MAX_ATTEMPTS for r in self.queue.rows())


QueueMachine.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestQueueMachine = QueueMachine.TestCase
