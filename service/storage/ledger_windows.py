"""What the ``ledger`` charges over a window of time: the budget's reads.

A window's charge is what its rows spent (a settled row) or hold (an open reservation's
whole reservation), read from the hourly totals the triggers keep plus the raw rows of
the first, partial hour; the same sums per person, per installation and per repository,
the pacer's per-pull-request times, and the dollar costs. ``ledger.py`` owns the rows
and their lifecycle; nothing here writes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Final

from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = [
    "ACTOR_SQL",
    "COSTS_SQL",
    "INSTALLATION_SQL",
    "WINDOW_SQL",
    "actor_charges",
    "actor_sql",
    "costs_since",
    "installation_charges",
    "installation_of",
    "installation_spend",
    "pacer_sql",
    "pacer_times",
    "repository_times",
    "window_charge",
    "window_charges",
    "window_params",
    "windows_sql",
]


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
