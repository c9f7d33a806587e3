"""The worker's side of the queue: claim a row with a lease, then finish, release, defer
or renew it.

``claim`` is where spending is decided, so it is written for the budget governor: it walks
candidates in FIFO order inside one transaction and leases the first one the ``admit`` hook
accepts; the transaction is ``concurrent``, so on PostgreSQL several hosts claim at once,
each candidate taken with ``FOR UPDATE SKIP LOCKED``. It is the one queue operation that
opens its own transaction (it needs the store's locks, and reads the clock inside it); the
moves on a lease are functions on the caller's transaction, like every table module's. The
hook is a plain predicate; this module imports nothing from ``service.budget``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from service.storage.database import Database, Transaction
from service.storage.queue import (
    CLAIMED,
    COLUMNS,
    DEFAULT_LEASE,
    LIFECYCLE,
    MAX_ATTEMPTS,
    PENDING,
    Claim,
    Lease,
    QueueRow,
    decode,
    target,
)
from service.storage.times import to_db_time

log = logging.getLogger(__name__)

_in: Final = LIFECYCLE.sql_in


@dataclass(frozen=True)
class Leasing:
    """How long a claim holds its row, and how many attempts a row gets."""

    lease: timedelta = DEFAULT_LEASE
    max_attempts: int = MAX_ATTEMPTS

    def __post_init__(self) -> None:
        if self.lease <= timedelta(0):
            raise ValueError("lease must be positive")
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")


# A status that is 'claimed' with a lapsed lease is, for every purpose, not leased. On a
# 'pending' row ``leased_until`` is a not-before time: a failed attempt handed back with a
# retry delay (``release(not_before=)``); NULL means at once.
_LEASE_LAPSED = (f"((status = '{PENDING}' AND (leased_until IS NULL OR leased_until <= :now))"
                 f" OR (status = '{CLAIMED}' AND leased_until <= :now))")

# ``{skip}`` is the store's ``skip_locked``: on PostgreSQL two hosts claiming at once each
# take the rows the other is not already handling, and never wait on one another for them.
_ABANDON_EXHAUSTED = f"""
UPDATE queue SET status = '{target("abandon")}', leased_until = NULL
 WHERE dedupe_key IN (
        SELECT dedupe_key FROM queue
         WHERE status IN {_in("abandon")} AND attempts >= :max_attempts AND {_LEASE_LAPSED}
         {{skip}})
RETURNING dedupe_key
"""

# The attempt that died stays counted (it was counted when it was claimed).
_RECOVER_LAPSED = f"""
UPDATE queue SET status = '{target("recover")}', owner = NULL, leased_until = NULL
 WHERE dedupe_key IN (
        SELECT dedupe_key FROM queue
         WHERE status IN {_in("recover")} AND leased_until <= :now {{skip}})
RETURNING dedupe_key, attempts
"""

_CLAIMABLE = f"status IN {_in('claim')} AND {_LEASE_LAPSED} AND attempts < :max_attempts"

# A live lease on the pull request ``:repo``/``:pr_number``.
_PULL_LEASED = (f"SELECT 1 FROM queue WHERE repo = :repo AND pr_number = :pr_number"
                f" AND status = '{CLAIMED}' AND leased_until > :now")

# Walked lazily in FIFO order; deliberately no LIMIT: the admit hook may refuse the head
# (a pr_opened at MENTION_ONLY) and the mention behind it must still be reachable.
# One pull request is reviewed by one worker at a time: a row whose pull request holds a
# live lease is skipped, not waited on. The walk itself locks nothing (a FOR UPDATE here
# would lock every candidate at once); each candidate is taken on its own (``_TAKE_ROW``).
CLAIMABLE_SQL = f"""
SELECT {COLUMNS} FROM queue
 WHERE {_CLAIMABLE}
   AND NOT EXISTS (
        SELECT 1 FROM queue AS other
         WHERE other.repo = queue.repo AND other.pr_number = queue.pr_number
           AND other.status = '{CLAIMED}' AND other.leased_until > :now)
 ORDER BY enqueued_at, dedupe_key
"""

# The same walk a page at a time, after the row ``(:after_at, :after_key)``: on a database
# server a statement's rows all come to the client at once, and a backlog of thousands
# would be fetched whole for every claim, which almost always takes the first.
_CLAIMABLE_PAGE = CLAIMABLE_SQL.replace(
    " ORDER BY enqueued_at, dedupe_key",
    "   AND (enqueued_at > :after_at OR (enqueued_at = :after_at AND dedupe_key > :after_key))"
    " ORDER BY enqueued_at, dedupe_key LIMIT :page")
_PAGE: Final = 32
_KEY_AT, _ENQUEUED_AT = 0, COLUMNS.split(", ").index("enqueued_at")

# One candidate, still claimable, locked for this transaction (or skipped when another
# claim holds it).
_TAKE_ROW = f"SELECT 1 FROM queue WHERE dedupe_key = :key AND {_CLAIMABLE} {{skip}}"


@functools.cache
def _with_skip(template: str, skip: str) -> str:
    """``template`` with the store's ``skip_locked`` clause, built once per store kind (the
    claim runs these on every pass)."""
    return template.format(skip=skip)

_TAKE_LEASE = f"""
UPDATE queue SET status = '{target("claim")}', owner = :owner, leased_until = :until,
                 attempts = attempts + 1
 WHERE dedupe_key = :key AND status IN {_in("claim")} AND {_LEASE_LAPSED}
"""

_FINISH = f"""
UPDATE queue SET status = '{target("finish")}', leased_until = NULL
 WHERE dedupe_key = :key AND owner = :owner AND status IN {_in("finish")}
"""

_RELEASE = f"""
UPDATE queue SET status = '{target("release")}', leased_until = :not_before, owner = NULL
 WHERE dedupe_key = :key AND owner = :owner AND status IN {_in("release")}
"""

# The attempt is given back: the plan's usage limit stopped the run, which says nothing
# about the trigger, so waiting for the reset must not use up its attempts.
_DEFER = f"""
UPDATE queue SET status = '{target("defer")}', leased_until = :not_before, owner = NULL,
                 attempts = attempts - 1
 WHERE dedupe_key = :key AND owner = :owner AND status IN {_in("defer")}
"""

_RENEW = f"""
UPDATE queue SET leased_until = :until
 WHERE dedupe_key = :key AND owner = :owner AND status = '{CLAIMED}'
"""


LapsedHook = Callable[[Transaction, Sequence[str], datetime], None]
"""Told, inside the claim's transaction, the keys whose lease lapsed (recovered or
abandoned): the budget closes their open reservations as ``lost``."""

AdmitHook = Callable[[Transaction, Claim, datetime], bool]
"""True admits the candidate, False refuses it (the walk moves on to the next one).

A hook may instead raise ``NothingAdmissible`` when its answer cannot depend on the
candidate (an exhausted budget): the claim then ends at once with None instead of
walking every pending row only to refuse each for the same reason.
"""


class NothingAdmissible(Exception):
    """Raised by an admit hook: no candidate can be admitted at this instant."""


def claim(
    store: Database, leasing: Leasing, *, now: datetime | Callable[[], datetime], owner: str,
    admit: AdmitHook | None = None, lapsed: LapsedHook | None = None,
) -> Claim | None:
    """Lease the oldest claimable row that ``admit`` accepts, or return None.

    One concurrent transaction holds: rows out of attempts become ``abandoned``; rows
    whose worker's lease lapsed go back to ``pending`` (their attempt counted), and
    ``lapsed`` is told both sets — all of this whether or not anything is admitted
    after; candidates (pending, whose pull request has no live lease) are offered to
    ``admit`` oldest first; the first accepted is leased with ``attempts + 1``. A
    refused candidate is left exactly as it was: refusal costs no attempt. ``admit``
    runs inside the transaction, so whatever it writes (the budget reservation)
    commits with the lease or not at all.

    Beside other hosts' claims (PostgreSQL), each candidate is taken with its row
    locked (``skip_locked``: a row another claim holds is passed over) and its pull
    request's named lock (``try_lock``), and only then is the pull request checked for
    a live lease again, so two claims never lease one pull request. ``admit`` and
    ``lapsed`` serialise what they read and write themselves (the budget's lock).

    ``now`` may be the clock itself (what the workers pass): it is then read once the
    transaction has begun, so a claim that waited for its connection or the write lock
    (a busy file, a database restarting) is stamped when it is made — its reservation
    is never dated before a budget policy it was admitted under.
    """
    if not owner:
        raise ValueError("owner must be a non-empty string")
    with store.transaction(concurrent=True) as conn:
        at = now() if callable(now) else now
        until = at + leasing.lease
        params = {"now": to_db_time(at), "max_attempts": leasing.max_attempts}
        skip = store.skip_locked
        abandoned = [key for (key,) in conn.execute(_with_skip(_ABANDON_EXHAUSTED, skip),
                                                    params)]
        if abandoned:
            log.warning("abandoned %d row(s) after %d attempts", len(abandoned),
                        leasing.max_attempts)
        recovered = list(conn.execute(_with_skip(_RECOVER_LAPSED, skip), params))
        for key, attempts in recovered:
            log.warning("a worker's lease lapsed; the row is pending again",
                        extra={"dedupe_key": key, "attempt": attempts})
        if lapsed is not None and (abandoned or recovered):
            lapsed(conn, [*abandoned, *(key for key, _ in recovered)], at)
        for row in _candidates(store, conn, params):
            if not _take(store, conn, row, params):
                continue
            candidate = Claim(job=row.job, lease=Lease(owner=owner, until=until,
                                                       attempt=row.attempts + 1))
            try:
                if admit is not None and not admit(conn, candidate, at):
                    continue
            except NothingAdmissible:
                return None
            taken = conn.execute(_TAKE_LEASE, {
                "key": row.dedupe_key, "owner": owner, "until": to_db_time(until),
                "now": params["now"],
            }).rowcount
            if taken != 1:  # pragma: no cover - impossible: the row is locked as ours
                raise RuntimeError(f"lease on {row.dedupe_key} vanished mid-claim")
            return candidate
    return None


def _candidates(store: Database, conn: Transaction, params: dict[str, object]
                ) -> Iterator[QueueRow]:
    """The claimable rows in FIFO order, read as the walk needs them: lazily from the
    file's cursor, a page at a time from a server."""
    if store.in_process:
        yield from (decode(values) for values in conn.execute(CLAIMABLE_SQL, params))
        return
    after_at, after_key = "", ""
    while True:
        page = conn.execute(_CLAIMABLE_PAGE, {**params, "after_at": after_at,
                                              "after_key": after_key,
                                              "page": _PAGE}).fetchall()
        for values in page:
            yield decode(values)
        if len(page) < _PAGE:
            return
        # The last row's stored values, as the keyset compares them.
        after_key, after_at = str(page[-1][_KEY_AT]), str(page[-1][_ENQUEUED_AT])


def _take(store: Database, conn: Transaction, row: QueueRow,
          params: dict[str, object]) -> bool:
    """Lock ``row`` and its pull request for this claim, if both are free and the row
    is still claimable with no live lease on its pull request."""
    if conn.execute(_with_skip(_TAKE_ROW, store.skip_locked),
                    {**params, "key": row.dedupe_key}).fetchone() is None:
        return False  # another claim holds it, or took it since the walk began
    if not store.try_lock(conn, f"pull:{row.repo}#{row.pr_number}"):
        return False  # another claim is leasing this pull request right now
    return conn.execute(_PULL_LEASED, {**params, "repo": row.repo,
                                       "pr_number": row.pr_number}).fetchone() is None


# --- the moves on a lease, each if ``owner`` still holds it (False changes nothing) ---


def finish(tx: Transaction, dedupe_key: str, owner: str) -> bool:
    """Mark the row done (the worker settles, records and finishes in one transaction)."""
    return tx.execute(_FINISH, {"key": dedupe_key, "owner": owner}).rowcount == 1


def release(tx: Transaction, dedupe_key: str, owner: str, *,
            not_before: datetime | None = None) -> bool:
    """Hand the row back as pending (its attempt stays counted); with ``not_before`` no
    claim takes it before that time (a retry delay)."""
    return tx.execute(_RELEASE, {
        "key": dedupe_key, "owner": owner,
        "not_before": None if not_before is None else to_db_time(not_before),
    }).rowcount == 1


def defer(tx: Transaction, dedupe_key: str, owner: str, *, until: datetime) -> bool:
    """Hand the row back as pending until ``until`` *with its attempt uncounted*: the
    plan's usage limit stopped the run (the settle that trips the breaker)."""
    return tx.execute(_DEFER, {"key": dedupe_key, "owner": owner,
                               "not_before": to_db_time(until)}).rowcount == 1


def renew(tx: Transaction, dedupe_key: str, owner: str, *, until: datetime) -> bool:
    """Extend a held lease to ``until``; False if the lease is no longer ours."""
    return tx.execute(_RENEW, {"key": dedupe_key, "owner": owner,
                               "until": to_db_time(until)}).rowcount == 1
