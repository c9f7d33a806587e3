"""The budget governor: rolling windows over the ledger, the ladder, reserve-then-settle.

A claim that can spend goes through ``Governor.admit``, called by ``ReviewQueue.claim``
inside the claim's own ``BEGIN IMMEDIATE``. It measures the three windows, picks the
rung, and either refuses (the row stays pending, no attempt spent) or writes a ledger
reservation of ``max_run_tokens`` that commits with the lease. An unsettled reservation
counts in full until it ages out of its window: that fallback is the whole concurrency
guarantee, and it is also why a crashed run is never granted an amnesty.

Arithmetic is integer throughout, so the rungs switch at exactly 85 % and 100 %.
"""

from __future__ import annotations

import enum
import logging
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, Literal

from service.config import BudgetConfig
from service.queue import Claim, NothingAdmissible
from service.store import SqliteStore, from_db_time, to_db_time

log = logging.getLogger(__name__)

Confidence = Literal["exact", "estimated", "unavailable"]
CONFIDENCES: Final = ("exact", "estimated", "unavailable")

#: Why a run ended: one of eleven, so ``GROUP BY stop_reason`` means something.
STOP_REASONS: Final = (
    "completed", "truncated", "failed", "timeout", "engine_error", "engine_unavailable",
    "refused", "closed", "lost", "infrastructure", "usage_limit",
)

MENTION_ONLY_PCT: Final = 85
EXHAUSTED_PCT: Final = 100


class Mode(enum.Enum):
    """The ladder's rungs, from the worst utilisation across the windows."""

    FULL = "full"                  # below 85 %: admit everything
    MENTION_ONLY = "mention_only"  # from 85 %: refuse pr_opened, admit mention
    EXHAUSTED = "exhausted"        # from 100 %: refuse everything


@dataclass(frozen=True)
class Window:
    name: str
    duration: timedelta


SESSION: Final = Window("session", timedelta(hours=5))
DAILY: Final = Window("daily", timedelta(hours=24))
WEEKLY: Final = Window("weekly", timedelta(days=7))
WINDOWS: Final = (SESSION, DAILY, WEEKLY)


def limit_of(window: Window, config: BudgetConfig) -> int:
    """A window's limit in whole tokens, the share already applied (see BudgetConfig)."""
    return {
        "session": config.session_limit,
        "daily": config.daily_limit,
        "weekly": config.weekly_limit,
    }[window.name]


@dataclass(frozen=True)
class Usage:
    """What a run cost and how far that can be trusted: one answer, one record.

    ``tokens`` is None only with confidence ``unavailable``: nothing could be read, so
    the ledger keeps the full reservation charged.
    """

    tokens: int | None
    confidence: Confidence
    engine: str | None
    model: str | None

    def __post_init__(self) -> None:
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"confidence must be one of {CONFIDENCES}, got {self.confidence!r}")
        if self.tokens is None and self.confidence != "unavailable":
            raise ValueError("tokens may be None only when confidence is 'unavailable'")
        if self.tokens is not None and (isinstance(self.tokens, bool) or self.tokens < 0):
            raise ValueError("tokens must be a non-negative integer")


@dataclass(frozen=True)
class WindowState:
    """One window as ``GET /budget`` shows it."""

    name: str
    duration_seconds: int
    limit: int
    spent: int          # settled usage in the window
    reserved: int       # open reservations in the window, counted in full
    frees_at: datetime | None  # when the oldest charge in the window ages out

    @property
    def charged(self) -> int:
        return self.spent + self.reserved

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.charged)

    def at_least(self, pct: int) -> bool:
        """Utilisation ≥ ``pct`` %, in integers: no float drift at a boundary."""
        return self.charged * 100 >= pct * self.limit

    @property
    def utilisation(self) -> float:
        return 1.0 if self.limit == 0 else round(self.charged / self.limit, 4)


def mode_for(windows: tuple[WindowState, ...]) -> Mode:
    """The rung for the worst window."""
    if any(w.at_least(EXHAUSTED_PCT) for w in windows):
        return Mode.EXHAUSTED
    if any(w.at_least(MENTION_ONLY_PCT) for w in windows):
        return Mode.MENTION_ONLY
    return Mode.FULL


def tightest(windows: tuple[WindowState, ...]) -> WindowState:
    """The window with the least allowance left (the first of equals, in WINDOWS order)."""
    return min(windows, key=lambda w: w.remaining)


@dataclass(frozen=True)
class Refusal:
    """Why a candidate was not admitted: enough for the notice to the person who asked."""

    dedupe_key: str
    reason: Literal["disabled", "exhausted", "mention_only", "insufficient"]
    mode: Mode
    window: str | None        # which window refused (None when disabled)
    frees_at: datetime | None  # when that window's oldest charge ages out
    at: datetime


@dataclass(frozen=True)
class Snapshot:
    """What ``GET /budget`` and ``pr-review-agent budget`` show."""

    now: datetime
    enabled: bool
    mode: Mode
    tightest: str
    max_run_tokens: int
    windows: tuple[WindowState, ...]

    def as_json(self) -> dict[str, object]:
        def iso(t: datetime | None) -> str | None:
            return None if t is None else t.isoformat()

        return {
            "now": iso(self.now),
            "enabled": self.enabled,
            "mode": self.mode.value,
            "tightest": self.tightest,
            "max_run_tokens": self.max_run_tokens,
            "windows": [
                {
                    "name": w.name, "duration_seconds": w.duration_seconds, "limit": w.limit,
                    "spent": w.spent, "reserved": w.reserved, "remaining": w.remaining,
                    "utilisation": w.utilisation, "frees_at": iso(w.frees_at),
                }
                for w in self.windows
            ],
        }


# One query measures a window: its charge is SUM(COALESCE(used_tokens, reserved_tokens))
# over the rows reserved after its start -- a settled row counts what it spent, an open
# one its whole reservation. Summing the rows directly costs a scan of every row in the
# window (25 ms at 100k rows); the same number is the window's whole hours from
# ledger_hours (kept by triggers, migration 24) plus the raw rows of its first, partial
# hour. The open reservations and the oldest charge come from indexes of their own.
_WINDOW = """
SELECT (SELECT COALESCE(SUM(charged), 0) FROM ledger_hours WHERE hour > :start_hour)
     + (SELECT COALESCE(SUM(COALESCE(used_tokens, reserved_tokens)), 0) FROM ledger
         WHERE reserved_at > :start AND reserved_at < :next_hour),
       (SELECT COALESCE(SUM(reserved_tokens), 0) FROM ledger
         WHERE settled_at IS NULL AND reserved_at > :start),
       (SELECT MIN(reserved_at) FROM ledger WHERE reserved_at > :start)
"""


def window_params(start: datetime) -> dict[str, str]:
    """The bounds ``_WINDOW`` needs for a window that opens (exclusively) at ``start``."""
    hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    stamp = to_db_time(start)
    return {"start": stamp, "start_hour": stamp[:13],
            "next_hour": to_db_time(hour + timedelta(hours=1))}


_CLOSE_PREDECESSOR = """
UPDATE ledger SET used_tokens = reserved_tokens, usage_confidence = 'unavailable',
                  stop_reason = 'lost', settled_at = :now
 WHERE dedupe_key = :key AND settled_at IS NULL
"""

_RESERVE = """
INSERT INTO ledger (dedupe_key, owner, actor_id, mode, reserved_tokens, reserved_at,
                    repo, pr_number)
VALUES (:key, :owner, :actor_id, :mode, :reserved, :now, :repo, :pr_number)
"""

_SETTLE = """
UPDATE ledger SET used_tokens = COALESCE(:tokens, reserved_tokens),
                  usage_confidence = :confidence, engine = :engine, model = :model,
                  settled_at = :now, stop_reason = :stop_reason,
                  reviewed_lines = :reviewed_lines, reviewed_since = :reviewed_since
 WHERE dedupe_key = :key AND owner = :owner AND settled_at IS NULL
"""


def measure(conn: sqlite3.Connection, now: datetime, config: BudgetConfig
            ) -> tuple[WindowState, ...]:
    """Every window's state at ``now``, read through ``conn``."""
    states = []
    for window in WINDOWS:
        charged, reserved, oldest = conn.execute(
            _WINDOW, window_params(now - window.duration)).fetchone()
        states.append(WindowState(
            name=window.name,
            duration_seconds=int(window.duration.total_seconds()),
            limit=limit_of(window, config),
            spent=int(charged) - int(reserved),
            reserved=int(reserved),
            frees_at=None if oldest is None else from_db_time(oldest) + window.duration,
        ))
    return tuple(states)


class Governor:
    """The one way to a claim that can spend.

    ``config`` may be replaced at any moment (SIGHUP) by one assignment of a new frozen
    ``BudgetConfig``; every decision reads it once.
    """

    def __init__(self, store: SqliteStore, config: BudgetConfig) -> None:
        self._store = store
        self.config = config
        self.refusals: dict[str, Refusal] = {}
        self.last_refusal: Refusal | None = None
        # Refused candidates in one claim all see the same ledger; measuring it again
        # for each would make an exhausted claim O(pending × window rows).
        self._memo: tuple[tuple[object, ...], tuple[WindowState, ...]] | None = None

    # -- inside the claim -----------------------------------------------------------------

    def admit(self, conn: sqlite3.Connection, claim: Claim, now: datetime) -> bool:
        """Reserve ``max_run_tokens`` for ``claim`` in the claim's transaction, or refuse.

        Returns False for a refusal that depends on the candidate (a ``pr_opened`` at
        MENTION_ONLY); raises ``NothingAdmissible`` when nothing could be admitted at
        ``now`` whatever the candidate (disabled, exhausted, or the tightest window's
        remainder below ``max_run_tokens``), which ends the claim's walk at once.
        ``enabled: false`` admits nothing: it is an emergency brake, not a way to stop
        counting. A refusal is remembered in ``refusals`` (by dedupe key) and in
        ``last_refusal`` for the notice to the person who asked.
        """
        config = self.config
        if not config.enabled:
            self._refuse(claim, "disabled", Mode.EXHAUSTED, None, now)
            raise NothingAdmissible("budget.enabled is false")
        windows = self._measure(conn, now, config)
        mode = mode_for(windows)
        worst = tightest(windows)
        if mode is Mode.EXHAUSTED:
            full = next(w for w in windows if w.at_least(EXHAUSTED_PCT))
            self._refuse(claim, "exhausted", mode, full, now)
            raise NothingAdmissible(f"the {full.name} window is exhausted")
        if worst.remaining < config.max_run_tokens:
            self._refuse(claim, "insufficient", mode, worst, now)
            raise NothingAdmissible(f"the {worst.name} window cannot fit a run")
        if mode is Mode.MENTION_ONLY and claim.kind == "pr_opened":
            high = next(w for w in windows if w.at_least(MENTION_ONLY_PCT))
            return self._refuse(claim, "mention_only", mode, high, now)

        stamp = to_db_time(now)
        lost = conn.execute(_CLOSE_PREDECESSOR, {"key": claim.dedupe_key, "now": stamp}).rowcount
        if lost:
            log.warning("closed a predecessor reservation as lost",
                        extra={"dedupe_key": claim.dedupe_key, "attempt": claim.attempts,
                               "owner": claim.owner})
        conn.execute(_RESERVE, {
            "key": claim.dedupe_key, "owner": claim.owner, "actor_id": claim.actor_id,
            "mode": mode.value, "reserved": config.max_run_tokens, "now": stamp,
            "repo": claim.repo, "pr_number": claim.pr_number,
        })
        self._memo = None
        self.refusals.pop(claim.dedupe_key, None)
        return True

    def _measure(self, conn: sqlite3.Connection, now: datetime, config: BudgetConfig
                 ) -> tuple[WindowState, ...]:
        # Valid only while nothing has written the ledger: not this connection
        # (total_changes) and not any other (data_version moves on another's commit).
        (data_version,) = conn.execute("PRAGMA data_version").fetchone()
        key = (conn, data_version, conn.total_changes, now, config)
        memo = self._memo  # one read: several threads may share this governor
        if memo is not None and memo[0] == key:
            return memo[1]
        windows = measure(conn, now, config)
        self._memo = (key, windows)
        return windows

    def _refuse(self, claim: Claim, reason: Literal["disabled", "exhausted", "mention_only",
                "insufficient"], mode: Mode, window: WindowState | None, now: datetime
                ) -> bool:
        refusal = Refusal(
            dedupe_key=claim.dedupe_key, reason=reason, mode=mode,
            window=None if window is None else window.name,
            frees_at=None if window is None else window.frees_at, at=now,
        )
        previous = self.refusals.get(claim.dedupe_key)
        self.refusals[claim.dedupe_key] = refusal
        self.last_refusal = refusal
        if previous is None or previous.reason != reason:
            level = logging.WARNING if reason in ("exhausted", "disabled") else logging.INFO
            log.log(level, "budget refused a claim: %s (window %s, frees at %s)", reason,
                    refusal.window, refusal.frees_at,
                    extra={"dedupe_key": claim.dedupe_key, "repo": claim.repo,
                           "pr": claim.pr_number})
        return False

    # -- after the run --------------------------------------------------------------------

    def settle(
        self,
        claim: Claim,
        usage: Usage,
        *,
        now: datetime,
        stop_reason: str = "completed",
        reviewed_lines: int | None = None,
        reviewed_since: str | None = None,
        conn: sqlite3.Connection | None = None,
    ) -> bool:
        """Record what the run cost on the open reservation ``(dedupe_key, owner)``.

        Returns False, changing nothing, when there is no such open reservation: the
        lease lapsed and a later attempt closed it as ``lost`` — this worker's result
        is no longer its to publish. Pass ``conn`` to settle inside a caller's
        transaction (settle + record the run + finish commit together).
        """
        if stop_reason not in STOP_REASONS:
            raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {stop_reason!r}")
        params = {
            "key": claim.dedupe_key, "owner": claim.owner, "tokens": usage.tokens,
            "confidence": usage.confidence, "engine": usage.engine, "model": usage.model,
            "now": to_db_time(now), "stop_reason": stop_reason,
            "reviewed_lines": reviewed_lines, "reviewed_since": reviewed_since,
        }
        if conn is None:
            with self._store.transaction() as own:
                settled = own.execute(_SETTLE, params).rowcount
        else:
            settled = conn.execute(_SETTLE, params).rowcount
        if settled != 1:
            log.warning("no open reservation to settle",
                        extra={"dedupe_key": claim.dedupe_key, "owner": claim.owner,
                               "attempt": claim.attempts})
        return settled == 1

    # -- for operators --------------------------------------------------------------------

    def snapshot(self, now: datetime) -> Snapshot:
        """The windows, the rung and the tightest window at ``now``."""
        config = self.config
        with self._store.read() as conn:
            windows = measure(conn, now, config)
        mode = mode_for(windows) if config.enabled else Mode.EXHAUSTED
        return Snapshot(
            now=now, enabled=config.enabled, mode=mode, tightest=tightest(windows).name,
            max_run_tokens=config.max_run_tokens, windows=windows,
        )
