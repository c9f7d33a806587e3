"""The limits that depend on the candidate: the pacer and the per-person cap.

Both refuse one candidate and let the claim's walk go on to the next, so that one pull
request or one person cannot hold up everybody else's work.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Final

from service.budget.windows import DAILY, ActorCharge, WindowState, measure_actor
from service.config import BudgetConfig
from service.queue import Claim
from service.store import from_db_time, to_db_time

#: Runs settled at zero for these reasons did no review, so the pacer does not count them.
PACER_EXEMPT: Final = ("refused", "closed", "engine_unavailable")
#: The pacer counts a pull request's runs over this trailing window.
PACER_WINDOW: Final = DAILY.duration

# Off the ledger_pull_request index (repo, pr_number, reserved_at). The candidate's own
# earlier attempts (a crashed run being retried) are the same review, not another one.
_PACER = """
SELECT reserved_at FROM ledger
 WHERE repo = :repo AND pr_number = :pr_number AND reserved_at > :start
   AND dedupe_key != :key
   AND NOT (settled_at IS NOT NULL AND used_tokens = 0
            AND stop_reason IN (""" + ", ".join(f"'{r}'" for r in PACER_EXEMPT) + """))
 ORDER BY reserved_at
"""


def pacer_frees_at(conn: sqlite3.Connection, claim: Claim, now: datetime,
                   config: BudgetConfig) -> datetime | None:
    """When ``claim``'s pull request may be run again, or None if it may be now.

    A pull request that has had ``max_reviews_per_pr`` counted runs in the last 24 hours
    waits until the oldest of the ones over the limit leaves that window.
    """
    runs = [str(at) for (at,) in conn.execute(_PACER, {
        "repo": claim.repo, "pr_number": claim.pr_number, "key": claim.dedupe_key,
        "start": to_db_time(now - PACER_WINDOW)})]
    over = len(runs) - config.max_reviews_per_pr
    return None if over < 0 else from_db_time(runs[over]) + PACER_WINDOW


def over_cap(conn: sqlite3.Connection, now: datetime, actor_id: int,
             windows: tuple[WindowState, ...], config: BudgetConfig) -> ActorCharge | None:
    """``actor_id``'s charge in the first window where ``per_actor_pct`` of its effective
    limit cannot fit another run of ``max_run_tokens``, or None when every window can."""
    pct, run = config.per_actor_pct, config.max_run_tokens
    return next((charge for window, charge in zip(
        windows, measure_actor(conn, now, actor_id), strict=True)
        if window.limit * pct // 100 - charge.charged < run), None)
