"""The limits that depend on the candidate: the pacer, the repository caps, and the
per-person and per-installation shares.

Each refuses one candidate and lets the claim's walk go on to the next, so that one pull
request, repository, person or installation cannot hold up everybody else's work.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

from service.budget.windows import DAILY, ActorCharge, WindowState, measure_actor
from service.config.schema import BudgetConfig
from service.storage import ledger_windows
from service.storage.database import Transaction
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
    runs = ledger_windows.pacer_times(conn, repo=claim.job.repo, pr_number=claim.job.pr_number,
                              key=claim.dedupe_key, start=now - PACER_WINDOW,
                              exempt=PACER_EXEMPT)
    over = len(runs) - config.max_reviews_per_pr
    return None if over < 0 else runs[over] + PACER_WINDOW


def repository_frees_at(conn: Transaction, claim: Claim, now: datetime,
                        config: BudgetConfig) -> datetime | None:
    """When ``claim``'s repository may be run again under its
    ``repository_reviews_per_day`` cap, or None if it may be now (or has no cap)."""
    cap = dict(config.repository_reviews_per_day).get(claim.job.repo.lower())
    if cap is None:
        return None
    runs = ledger_windows.repository_times(conn, repo=claim.job.repo, key=claim.dedupe_key,
                                   start=now - PACER_WINDOW, exempt=PACER_EXEMPT)
    over = len(runs) - cap
    return None if over < 0 else runs[over] + PACER_WINDOW


def over_cap(conn: Transaction, now: datetime, actor_id: int,
             windows: tuple[WindowState, ...], config: BudgetConfig, *,
             installation: bool = False) -> ActorCharge | None:
    """``actor_id``'s charge in the first window where ``per_actor_pct`` of its effective
    limit cannot fit another run of ``max_run_tokens``, or None when every window can.
    With ``installation``, ``actor_id`` is an installation and the share
    ``per_installation_pct``."""
    pct = config.per_installation_pct if installation else config.per_actor_pct
    run = config.max_run_tokens
    return next((charge for window, charge in zip(
        windows, measure_actor(conn, now, actor_id, installation=installation), strict=True)
        if window.limit * pct // 100 - charge.charged < run), None)
