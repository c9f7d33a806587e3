"""The ``ledger`` table and its hourly totals (``ledger_hours``, ``ledger_cost_hours``).

A ledger row is one reservation: written open by the claim that admits a run (the
governor's ``admit``, inside the claim's transaction), and closed exactly once, either
settled with what the run cost or lost (its worker died, or a later attempt of the same
trigger found it still open) at the full charge it was carrying. ``TRANSITIONS`` is that
lifecycle, and the only place it is written down; each write below takes its ``WHERE``
from it. The hourly tables are kept by triggers (migrations 24 and 26), so no writer can
forget them; the window sums read them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from service.storage.database import Transaction
from service.storage.lifecycle import Lifecycle
from service.storage.times import from_db_time, to_db_time

__all__ = [
    "ACTOR_SQL",
    "COSTS_SQL",
    "INSTALLATION_SQL",
    "LOST",
    "OPEN",
    "SETTLED",
    "STATES",
    "TRANSITIONS",
    "WINDOW_SQL",
    "Reservation",
    "Settlement",
    "actor_charges",
    "charged",
    "costs_since",
    "estimator_samples",
    "installation_charges",
    "installation_of",
    "installation_spend",
    "latest",
    "lose",
    "open_mode",
    "open_reserved",
    "pacer_sql",
    "pacer_times",
    "recent",
    "repository_times",
    "reserve",
    "settle",
    "settled_usage",
    "state",
    "target",
    "window_charge",
    "window_charges",
    "window_params",
    "windows_sql",
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
                  cost_usd = :cost_usd
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
    }).rowcount == 1


def open_mode(tx: Transaction, key: str, owner: str) -> str | None:
    """The rung ``owner``'s open reservation of ``key`` was admitted under, if it is open."""
    row = tx.execute(_OPEN_MODE, {"key": key, "owner": owner}).fetchone()
    return None if row is None else str(row[0])


def open_reserved(tx: Transaction, key: str, owner: str) -> int | None:
    """``reserved_tokens`` of ``owner``'s open reservation of ``key``, or None."""
    row = tx.execute(_OPEN_RESERVED, {"key": key, "owner": owner}).fetchone()
    return None if row is None else int(row[0])


# --- the windows -------------------------------------------------------------------------

# One query measures a window: its charge is SUM(COALESCE(used_tokens, reserved_tokens))
# over the rows reserved after its start -- a settled row counts what it spent, an open
# one its whole reservation. Summing the rows directly costs a scan of every row in the
# window (25 ms at 100k rows); the same number is the window's whole hours from
# ledger_hours (kept by triggers, migration 24) plus the raw rows of its first, partial
# hour. The open reservations and the oldest charge come from indexes of their own.
WINDOW_SQL: Final = """
SELECT (SELECT COALESCE(SUM(charged), 0) FROM ledger_hours WHERE hour > :start_hour)
     + (SELECT COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) FROM ledger
         WHERE reserved_at > :start AND reserved_at < :next_hour),
       (SELECT COALESCE(SUM(reserved_tokens), 0) FROM ledger
         WHERE settled_at IS NULL AND reserved_at > :start),
       (SELECT MIN(reserved_at) FROM ledger WHERE reserved_at > :start)
"""


def window_params(start: datetime) -> dict[str, str]:
    """The bounds ``WINDOW_SQL`` (and the dollar query) need for a window opening
    (exclusively) at ``start``."""
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    stamp = to_db_time(start)
    return {"start": stamp, "start_hour": stamp[:13],
            "next_hour": to_db_time(hour + timedelta(hours=1))}


def window_charge(tx: Transaction, start: datetime) -> tuple[int, int, datetime | None]:
    """``(charged, open reserved, oldest reserved_at)`` of the rows reserved after ``start``."""
    charged, reserved, oldest = tx.execute(WINDOW_SQL, window_params(start)).fetchone()
    return int(charged), int(reserved), None if oldest is None else from_db_time(oldest)


@functools.lru_cache(maxsize=8)
def windows_sql(count: int) -> str:
    """``WINDOW_SQL`` once per window, its parameters numbered (``:start_0``...), each row
    tagged with the window's index: what ``window_charges`` sends in one statement."""
    return "\nUNION ALL\n".join(
        re.sub(r":(start_hour|next_hour|start)\b", rf":\1_{k:d}", WINDOW_SQL.strip())
        .replace("SELECT ", f"SELECT {k:d}, ", 1)
        for k in range(count))


def window_charges(tx: Transaction, starts: Sequence[datetime]
                   ) -> list[tuple[int, int, datetime | None]]:
    """``window_charge`` for each of ``starts``, in one statement: the claim reads every
    window under the budget's lock, where each round trip to a server is time held."""
    params = {f"{name}_{k}": value for k, start in enumerate(starts)
              for name, value in window_params(start).items()}
    rows = sorted(tx.execute(windows_sql(len(starts)), params).fetchall())
    return [(int(charged), int(reserved), None if oldest is None else from_db_time(oldest))
            for _, charged, reserved, oldest in rows]


def actor_sql(names: Sequence[str], column: str = "actor_id") -> str:
    """One person's (or, with ``column="installation_id"``, one installation's) charge in
    each named window (the last the longest), in one range scan off the
    ``ledger_actor_window`` (``ledger_installation_window``) index, split by CASE into the
    shorter ones. A person's rows in a week are few (runs somebody asked for), and an
    installation's are at most the window's, so no hourly table is needed."""
    return "SELECT " + ", ".join(
        f"COALESCE(SUM(CASE WHEN reserved_at > :{name} THEN"
        f" COALESCE(used_tokens, reserved_tokens) END), 0),"
        f" MIN(CASE WHEN reserved_at > :{name} THEN reserved_at END)"
        for name in names
    ) + f" FROM ledger WHERE {column} = :actor AND reserved_at > :{names[-1]}"


ACTOR_SQL: Final = actor_sql(("session", "daily", "weekly"))
"""The query ``actor_charges`` runs for the budget's three windows."""
INSTALLATION_SQL: Final = actor_sql(("session", "daily", "weekly"), "installation_id")
"""The query ``installation_charges`` runs for the budget's three windows."""


def actor_charges(tx: Transaction, actor_id: int, starts: Sequence[tuple[str, datetime]]
                  ) -> list[tuple[int, datetime | None]]:
    """``(charged, oldest reserved_at)`` of ``actor_id``'s rows after each named start
    (ordered shortest window first, so the last start is the earliest)."""
    return _charges(tx, actor_id, starts, "actor_id")


def installation_charges(tx: Transaction, installation_id: int,
                         starts: Sequence[tuple[str, datetime]]
                         ) -> list[tuple[int, datetime | None]]:
    """``actor_charges`` for the rows charged to ``installation_id``."""
    return _charges(tx, installation_id, starts, "installation_id")


def _charges(tx: Transaction, who: int, starts: Sequence[tuple[str, datetime]],
             column: str) -> list[tuple[int, datetime | None]]:
    names = tuple(name for name, _ in starts)
    if names == ("session", "daily", "weekly"):
        sql = ACTOR_SQL if column == "actor_id" else INSTALLATION_SQL
    else:
        sql = actor_sql(names, column)
    params: dict[str, object] = {name: to_db_time(at) for name, at in starts}
    params["actor"] = who
    row = tx.execute(sql, params).fetchone()
    return [(int(row[2 * i]), None if row[2 * i + 1] is None else from_db_time(row[2 * i + 1]))
            for i in range(len(names))]


def installation_spend(tx: Transaction, starts: Sequence[tuple[str, datetime]]
                       ) -> list[tuple[int | None, list[int]]]:
    """Each installation's charge in each named window (the last the longest), for the
    ones charged anything in the longest; ``None`` gathers rows whose repository was not
    known to be installed. Highest charge in the longest window first."""
    names = tuple(name for name, _ in starts)
    sql = ("SELECT installation_id, " + ", ".join(
        f"COALESCE(SUM(CASE WHEN reserved_at > :{name} THEN"
        f" COALESCE(used_tokens, reserved_tokens) END), 0)" for name in names)
        + f" FROM ledger WHERE reserved_at > :{names[-1]} GROUP BY installation_id")
    params = {name: to_db_time(at) for name, at in starts}
    rows = [(None if r[0] is None else int(r[0]), [int(v) for v in r[1:]])
            for r in tx.execute(sql, params).fetchall()]
    return sorted(rows, key=lambda r: (-r[1][-1], r[0] is None, r[0] or 0))


_INSTALLATION_OF = "SELECT installation_id FROM repositories WHERE repo = ?"
_REPO_TIMES = """
SELECT reserved_at FROM ledger
 WHERE repo = :repo AND reserved_at > :start AND dedupe_key != :key
   AND NOT (settled_at IS NOT NULL AND used_tokens = 0 AND stop_reason IN ({}))
 ORDER BY reserved_at
"""


def installation_of(tx: Transaction, repo: str) -> int | None:
    """The installation ``repo`` is known to belong to (what a reservation is charged
    to), or None."""
    row = tx.execute(_INSTALLATION_OF, (repo,)).fetchone()
    return None if row is None else int(row[0])


def repository_times(tx: Transaction, *, repo: str, key: str, start: datetime,
                     exempt: tuple[str, ...]) -> list[datetime]:
    """When each counted run of ``repo`` (other than ``key``'s own attempts) was reserved
    after ``start``, oldest first: ``pacer_times`` for a whole repository."""
    sql = _REPO_TIMES.format(", ".join(f"'{r}'" for r in exempt))
    rows = tx.execute(sql, {"repo": repo, "start": to_db_time(start), "key": key}).fetchall()
    return [from_db_time(r[0]) for r in rows]


# Off the ledger_pull_request index (repo, pr_number, reserved_at). The candidate's own
# earlier attempts (a crashed run being retried) are the same review, not another one.
_PACER = """
SELECT reserved_at FROM ledger
 WHERE repo = :repo AND pr_number = :pr_number AND reserved_at > :start
   AND dedupe_key != :key
   AND NOT (settled_at IS NOT NULL AND used_tokens = 0 AND stop_reason IN ({}))
 ORDER BY reserved_at
"""


@functools.lru_cache(maxsize=8)
def pacer_sql(exempt: tuple[str, ...]) -> str:
    """The query ``pacer_times`` runs, with ``exempt`` as the stop reasons left out."""
    return _PACER.format(", ".join(f"'{r}'" for r in exempt))


def pacer_times(tx: Transaction, *, repo: str, pr_number: int, key: str, start: datetime,
                exempt: Sequence[str]) -> list[datetime]:
    """When each run of ``repo#pr_number`` after ``start`` was reserved, oldest first:
    every run but ``key``'s own and those settled at zero for an ``exempt`` reason."""
    sql = pacer_sql(tuple(exempt))
    return [from_db_time(str(at)) for (at,) in tx.execute(sql, {
        "repo": repo, "pr_number": pr_number, "key": key, "start": to_db_time(start)})]


# Reported costs since a start, in the shape of the token window query: the whole hours
# from ledger_cost_hours (kept by triggers, migration 26) plus the raw rows of the first,
# partial hour. Rounded to micro-dollars exactly as the triggers round them.
COSTS_SQL = """
SELECT h.m + p.m, h.t + p.t, h.r + p.r FROM
  (SELECT COALESCE(SUM(micro_usd), 0) AS m, COALESCE(SUM(tokens), 0) AS t,
          COALESCE(SUM(runs), 0) AS r
     FROM ledger_cost_hours WHERE hour > :start_hour) AS h,
  (SELECT COALESCE(SUM(CAST(round(cost_usd * 1000000) AS BIGINT)), 0) AS m,
          COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) AS t, COUNT(*) AS r
     FROM ledger WHERE reserved_at > :start AND reserved_at < :next_hour
      AND cost_usd IS NOT NULL) AS p
"""


def costs_since(tx: Transaction, start: datetime) -> tuple[int, int, int]:
    """``(micro-dollars, tokens, runs)`` of the priced rows reserved after ``start``."""
    m, t, r = tx.execute(COSTS_SQL, window_params(start)).fetchone()
    return int(m), int(t), int(r)


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
