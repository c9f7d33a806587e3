"""The limits that depend on the candidate: the pacer and the per-person cap.

Both refuse one candidate and let the claim's walk go on to the next, so that one pull
request or one person cannot hold up everybody else's work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from service.budget.windows import DAILY, ActorCharge, WindowState, measure_actor
from service.config import BudgetConfig
from service.storage import Transaction, ledger
from service.storage.queue import Claim

#: Runs settled at zero for these reasons did no review, so the pacer does not count them.
PACER_EXEMPT: Final = ("refused", "closed", "engine_unavailable")
#: The pacer counts a pull request's runs over this trailing window.
PACER_WINDOW: Final = DAILY.duration

def pacer_frees_at(conn: Transaction, claim: Claim, now: datetime,
                   config: BudgetConfig) -> datetime | None:
    """When ``claim``'s pull request may be run again, or None if it may be now.

    A pull request that has had ``max_reviews_per_pr`` counted runs in the last 24 hours
    waits until the oldest of the ones over the limit leaves that window.
    """
    runs = ledger.pacer_times(conn, repo=claim.repo, pr_number=claim.pr_number,
                              key=claim.dedupe_key, start=now - PACER_WINDOW,
                              exempt=PACER_EXEMPT)
    over = len(runs) - config.max_reviews_per_pr
    return None if over < 0 else runs[over] + PACER_WINDOW


def over_cap(conn: Transaction, now: datetime, actor_id: int,
             windows: tuple[WindowState, ...], config: BudgetConfig) -> ActorCharge | None:
    """``actor_id``'s charge in the first window where ``per_actor_pct`` of its effective
    limit cannot fit another run of ``max_run_tokens``, or None when every window can."""
    pct, run = config.per_actor_pct, config.max_run_tokens
    return next((charge for window, charge in zip(
        windows, measure_actor(conn, now, actor_id), strict=True)
        if window.limit * pct // 100 - charge.charged < run), None)
