"""Moving a store from the SQLite file to PostgreSQL: every row, in one transaction.

``pr-review-agent migrate --from state.db --to postgresql://…`` is how a team moves to
several hosts without losing its history: the ledger comes along, so the budget windows
the new database starts from are the ones the file had. The target must be empty (a copy
never merges), the copy runs in one transaction (it lands whole or not at all), and every
table is read back from both sides and compared row for row before the commit. The
hourly ledger totals are not copied: the target's triggers rebuild them from the ledger
rows, and the comparison checks that they came out equal to the file's.

This module reads and writes every table by name, which no table module may: it is the
one place that moves rows wholesale, and it changes none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from service.storage.database import Database, Transaction
from service.storage.postgres import PostgresStore

__all__ = ["COPIED", "DERIVED", "Copied", "CopyError", "copy_store"]

#: Every table with rows of its own, in an order that needs no deferred constraints, and
#: the columns that order each one for the comparison (its primary key).
COPIED: Final[tuple[tuple[str, str], ...]] = (
    ("etags", "path"),
    ("watermarks", "name"),
    ("queue", "dedupe_key"),
    ("ledger", "id"),
    ("runs", "dedupe_key"),
    ("budget_state", "key"),
    ("budget_policy", "id"),
    ("agent_comments", "repo, comment_id"),
    ("deliveries", "delivery_id"),
    ("repositories", "repo"),
    ("closed_pull_requests", "repo, pr_number"),
    ("notices", "dedupe_key"),
    ("checks", "dedupe_key, head_sha"),
    ("repository_files", "url"),
    ("posted_findings", "repo, pr_number, fingerprint"),
    ("pr_summaries", "repo, pr_number"),
    ("repository_polls", "repo"),
)
#: Tables the target derives itself (the ledger's triggers), compared but not copied.
DERIVED: Final[tuple[tuple[str, str], ...]] = (("ledger_hours", "hour"),
                                               ("ledger_cost_hours", "hour"))


class CopyError(RuntimeError):
    """The copy was refused or did not verify; the target is left as it was."""


@dataclass(frozen=True)
class Copied:
    """Rows copied per table (every table of ``COPIED``, in its order)."""

    rows: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def _columns(tx: Transaction, table: str) -> list[str]:
    cursor = tx.execute(f"SELECT * FROM {table} LIMIT 0")
    return [str(d[0]) for d in cursor.description]


def _rows(tx: Transaction, table: str, columns: list[str], order: str) -> list[tuple[object, ...]]:
    return [tuple(row) for row in tx.execute(
        f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")]


def copy_store(source: Database, target: PostgresStore) -> Copied:
    """Copy every row of ``source`` into the empty ``target``, verified, in one transaction."""
    if source.version != source.head_version or target.version != target.head_version:
        raise CopyError("both stores must be at this code's schema version; open each "
                        "with `pr-review-agent migrate` first")
    copied: dict[str, int] = {}
    with target.transaction() as out, source.read() as src:
        busy = [t for t, _ in (*COPIED, *DERIVED)
                if out.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None]
        if busy:
            raise CopyError(f"the target is not empty ({', '.join(busy)} hold rows); a copy "
                            "goes into a new, empty database only")
        for table, order in COPIED:
            columns = _columns(src, table)
            missing = sorted(set(columns) - set(_columns(out, table)))
            if missing:
                raise CopyError(f"{table}: the target has no column {', '.join(missing)}")
            rows = _rows(src, table, columns, order)
            if rows:
                marks = ", ".join("?" for _ in columns)
                out.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                                rows)
            copied[table] = len(rows)
        _continue_ids(out)
        for table, order in (*COPIED, *DERIVED):
            columns = _columns(src, table)
            if _rows(src, table, columns, order) != _rows(out, table, columns, order):
                raise CopyError(f"{table}: the copy does not read back as the source's rows")
    return Copied(copied)


def _continue_ids(out: Transaction) -> None:
    # A copied ledger keeps its ids; the next reservation must get the next one.
    out.execute("SELECT setval(pg_get_serial_sequence('ledger', 'id'),"
                " COALESCE((SELECT MAX(id) FROM ledger), 1),"
                " (SELECT COUNT(*) > 0 FROM ledger))")
