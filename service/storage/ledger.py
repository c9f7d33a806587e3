"""The ``ledger`` table and its hourly totals (``ledger_hours``, ``ledger_cost_hours``).

A ledger row is one reservation: written open by the claim that admits a run (the
governor's ``admit``, inside the claim's transaction), and closed exactly once, either
settled with what the run cost or lost (its worker died, or a later attempt of the same
trigger found it still open) at the full charge it was carrying. ``TRANSITIONS`` is that
lifecycle, and the only place it is written down; each write below takes its ``WHERE``
from it. The hourly tables are kept by triggers (migrations 24 and 26), so no writer can
forget them; the window sums (ledger_windows.py) read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from service.storage.database import Transaction
from service.storage.lifecycle import Lifecycle
from service.storage.times import to_db_time

__all__ = [
    "LOST",
    "OPEN",
    "SETTLED",
    "STATES",
    "TRANSITIONS",
    "Reservation",
    "Settlement",
    "charged",
    "estimator_samples",
    "latest",
    "lose",
    "open_mode",
    "open_reserved",
    "recent",
    "reserve",
    "settle",
    "settled_usage",
    "state",
    "target",
]

# --- the lifecycle of a reservation ----------------------------------------------------

OPEN: Final = "open"
SETTLED: Final = "settled"
LOST: Final = "lost"
STATES: Final = (OPEN, SETTLED, LOST)

#: (event, from-state) -> to-state. ``settle`` is the worker recording what its run
#: cost; ``lose`` closes a reservation nobody can settle any more (its lease lapsed, or
#: the next attempt of the same trigger is about to reserve) at the full charge.
LIFECYCLE: Final = Lifecycle("ledger", STATES, {
    ("settle", OPEN): SETTLED,
    ("lose", OPEN): LOST,
})
TRANSITIONS: Final = LIFECYCLE.transitions
target: Final = LIFECYCLE.target

# The state as the columns hold it: open until settled_at is stamped; lost is a closed
# row whose stop_reason says so.
_STATE_SQL: Final = {
    OPEN: "settled_at IS NULL",
    SETTLED: "(settled_at IS NOT NULL AND stop_reason != 'lost')",
    LOST: "(settled_at IS NOT NULL AND stop_reason = 'lost')",
}


def _from(event: str) -> str:
    """The ``WHERE`` fragment: the row is in a state ``event`` may leave."""
    return " OR ".join(_STATE_SQL[s] for s in LIFECYCLE.sources(event))


_LOSE = f"""
UPDATE ledger SET used_tokens = reserved_tokens, usage_confidence = 'unavailable',
                  stop_reason = '{target("lose")}', settled_at = :now
 WHERE dedupe_key = :key AND {_from("lose")}
"""

_RESERVE = """
INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens, reserved_at,
                    repo, pr_number, installation_id)
VALUES (:key, :owner, :actor_id, :mode, :reserved, :now, :repo, :pr_number,
        (SELECT installation_id FROM repositories WHERE repo = :repo))
"""

_SETTLE = f"""
UPDATE ledger SET used_tokens = COALESCE(:tokens, reserved_tokens),
                  usage_confidence = :confidence, engine = :engine, model = :model,
                  settled_at = :now, stop_reason = :stop_reason,
                  reviewed_lines = :reviewed_lines, reviewed_since = :reviewed_since,
                  cost_usd = :cost_usd, estimated_tokens = :estimated_tokens
 WHERE dedupe_key = :key AND owner = :owner AND {_from("settle")}
"""

_OPEN_MODE = f"""
SELECT mode FROM ledger WHERE dedupe_key = :key AND owner = :owner AND {_STATE_SQL[OPEN]}
"""

_OPEN_RESERVED = f"""
SELECT reserved_tokens FROM ledger
 WHERE dedupe_key = :key AND owner = :owner AND {_STATE_SQL[OPEN]}
"""


@dataclass(frozen=True)
class Reservation:
    """What an admitted claim reserves: ``tokens`` for ``dedupe_key`` held by ``owner``."""

    dedupe_key: str
    owner: str
    actor_id: int
    mode: str
    tokens: int
    repo: str
    pr_number: int


@dataclass(frozen=True)
class Settlement:
    """What a run cost, recorded on its open reservation (``tokens`` None: the reservation)."""

    tokens: int | None
    confidence: str
    engine: str | None
    model: str | None
    stop_reason: str
    reviewed_lines: int | None
    reviewed_since: str | None
    cost_usd: float | None
    #: What the worker estimated before the run started (None: no estimate was made).
    estimated_tokens: int | None = None


_ROW_STATE = ("SELECT " + ", ".join(f"CASE WHEN {_STATE_SQL[s]} THEN 1 ELSE 0 END"
                                    for s in STATES) + " FROM ledger WHERE id = :id")


def state(tx: Transaction, row_id: int) -> str | None:
    """The state of ledger row ``row_id``, read through the predicates the writes use (a
    ``RuntimeError`` when its columns contradict each other), or None when there is none."""
    row = tx.execute(_ROW_STATE, {"id": row_id}).fetchone()
    if row is None:
        return None
    matched = [s for s, hit in zip(STATES, row, strict=True) if hit]
    if len(matched) != 1:
        raise RuntimeError(f"ledger row {row_id} is in {len(matched)} states: {matched}")
    return matched[0]


#: What a trigger was charged: every row of its key, at what the row charges the windows.
CHARGED_SQL: Final = ("(SELECT COALESCE(SUM(COALESCE(l.used_tokens, l.reserved_tokens)), 0)"
                      " FROM ledger l WHERE l.dedupe_key = {key})")


def charged(tx: Transaction, key: str) -> int:
    """What ``key``'s reservations charge the windows, all attempts together (settled at
    their use, lost and open ones at their reservation)."""
    (total,) = tx.execute("SELECT " + CHARGED_SQL.format(key="?"), (key,)).fetchone()
    return int(total)


def lose(tx: Transaction, key: str, now: datetime) -> int:
    """Close ``key``'s open reservation (if any) as lost at its full charge; rows closed."""
    return tx.execute(_LOSE, {"key": key, "now": to_db_time(now)}).rowcount


def reserve(tx: Transaction, reservation: Reservation, now: datetime) -> None:
    """Write an open reservation. A second open one for the key violates ``ledger_open``."""
    r = reservation
    tx.execute(_RESERVE, {"key": r.dedupe_key, "owner": r.owner, "actor_id": r.actor_id,
                          "mode": r.mode, "reserved": r.tokens, "now": to_db_time(now),
                          "repo": r.repo, "pr_number": r.pr_number})


def settle(tx: Transaction, key: str, owner: str, settlement: Settlement,
           now: datetime) -> bool:
    """Settle ``owner``'s open reservation of ``key``; False when there is none to settle."""
    s = settlement
    return tx.execute(_SETTLE, {
        "key": key, "owner": owner, "tokens": s.tokens, "confidence": s.confidence,
        "engine": s.engine, "model": s.model, "now": to_db_time(now),
        "stop_reason": s.stop_reason, "reviewed_lines": s.reviewed_lines,
        "reviewed_since": s.reviewed_since, "cost_usd": s.cost_usd,
        "estimated_tokens": s.estimated_tokens,
    }).rowcount == 1


def open_mode(tx: Transaction, key: str, owner: str) -> str | None:
    """The rung ``owner``'s open reservation of ``key`` was admitted under, if it is open."""
    row = tx.execute(_OPEN_MODE, {"key": key, "owner": owner}).fetchone()
    return None if row is None else str(row[0])


def open_reserved(tx: Transaction, key: str, owner: str) -> int | None:
    """``reserved_tokens`` of ``owner``'s open reservation of ``key``, or None."""
    row = tx.execute(_OPEN_RESERVED, {"key": key, "owner": owner}).fetchone()
    return None if row is None else int(row[0])


# --- what settled rows say -----------------------------------------------------------------

_SAMPLES = f"""
SELECT reviewed_lines, used_tokens FROM ledger
 WHERE {_STATE_SQL[SETTLED]} AND stop_reason = 'completed'
   AND reviewed_lines IS NOT NULL AND used_tokens IS NOT NULL
   AND usage_confidence IN ('exact', 'estimated') AND engine = :engine
 ORDER BY id DESC LIMIT :limit
"""


def estimator_samples(tx: Transaction, engine: str, limit: int) -> list[tuple[int, int]]:
    """``(reviewed_lines, used_tokens)`` of ``engine``'s latest completed, measured runs."""
    return [(int(x), int(y)) for x, y in tx.execute(_SAMPLES, {"engine": engine,
                                                                "limit": limit})]


# The last day's completed, measured runs that were estimated first: how far the pre-flight
# estimate is from what runs cost (the reserved_at index bounds the scan).
_ESTIMATES = f"""
SELECT engine, COUNT(*), SUM(used_tokens), SUM(estimated_tokens) FROM ledger
 WHERE reserved_at >= :since AND {_STATE_SQL[SETTLED]} AND stop_reason = 'completed'
   AND estimated_tokens > 0 AND used_tokens IS NOT NULL
   AND usage_confidence IN ('exact', 'estimated') AND engine IS NOT NULL
 GROUP BY engine ORDER BY engine
"""


def estimates(tx: Transaction, since: datetime) -> list[tuple[str, int, int, int]]:
    """``(engine, runs, used tokens, estimated tokens)`` of the runs reserved since
    ``since`` that completed, were measured and had been estimated."""
    return [(str(e), int(n), int(used), int(guessed)) for e, n, used, guessed in
            tx.execute(_ESTIMATES, {"since": to_db_time(since)})]


# Off the ledger_pull_request index (repo, pr_number, reserved_at): the settled row of the
# attempt that recorded the run is the newest one of its key.
_SETTLED_USAGE = """
SELECT l.used_tokens, l.reserved_tokens, l.usage_confidence, l.engine, l.model, l.mode,
       l.stop_reason, l.reviewed_since, l.cost_usd,
       (SELECT COALESCE(SUM(COALESCE(e.used_tokens, e.reserved_tokens)), 0) FROM ledger e
         WHERE e.dedupe_key = l.dedupe_key AND e.id < l.id)
  FROM ledger l
 WHERE l.repo = :repo AND l.pr_number = :pr_number AND l.dedupe_key = :key
   AND l.settled_at IS NOT NULL
 ORDER BY l.id DESC LIMIT 1
"""

_LATEST = """
SELECT stop_reason, used_tokens, usage_confidence, reserved_tokens, mode
  FROM ledger WHERE dedupe_key = :key ORDER BY id DESC LIMIT 1
"""

_USAGE_COLUMNS: Final = ("used_tokens", "reserved_tokens", "usage_confidence", "engine",
                         "model", "mode", "stop_reason", "reviewed_since", "cost_usd",
                         "earlier_tokens")
_LATEST_COLUMNS: Final = ("stop_reason", "used_tokens", "usage_confidence",
                          "reserved_tokens", "mode")


def settled_usage(tx: Transaction, *, repo: str, pr_number: int, key: str
                  ) -> dict[str, Any] | None:
    """The newest closed row of ``key`` (what the recorded run cost), by column name, with
    ``earlier_tokens``: what the key's earlier attempts were charged (lost ones, in full)."""
    row = tx.execute(_SETTLED_USAGE, {"repo": repo, "pr_number": pr_number,
                                      "key": key}).fetchone()
    return None if row is None else dict(zip(_USAGE_COLUMNS, row, strict=True))


_RECENT = """
SELECT dedupe_key, repo, pr_number, mode, stop_reason, reserved_tokens, used_tokens,
       usage_confidence, cost_usd, reserved_at, settled_at
  FROM ledger ORDER BY id DESC LIMIT ?
"""
_RECENT_COLUMNS: Final = ("dedupe_key", "repo", "pr_number", "mode", "stop_reason",
                          "reserved_tokens", "used_tokens", "usage_confidence", "cost_usd",
                          "reserved_at", "settled_at")


def recent(tx: Transaction, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` rows, open ones included (a run in progress), newest first."""
    return [dict(zip(_RECENT_COLUMNS, row, strict=True))
            for row in tx.execute(_RECENT, (limit,))]


def latest(tx: Transaction, key: str) -> dict[str, Any] | None:
    """The newest row of ``key``, open or closed, for an operator's report."""
    row = tx.execute(_LATEST, {"key": key}).fetchone()
    return None if row is None else dict(zip(_LATEST_COLUMNS, row, strict=True))
