"""One shared budget policy: the row every process on a store obeys.

Several processes (a web process and a worker process, later several hosts) spend one
allowance from one ledger, so they must agree on the five numbers that define it:
``enabled``, ``session_tokens``, ``weekly_tokens``, ``max_run_tokens`` and
``reviewer_share_pct``. The ``budget_policy`` row (id 1) holds them as JSON, with the
label of the process that published them (``authority_repo``) and when. Each claim reads
the row in its own transaction and applies it over the process's own config; the rest of
``BudgetConfig`` (per-person cap, pacer, dollar cap) stays each process's own.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from service.config.schema import BudgetConfig
from service.storage import budget_state
from service.storage.database import Transaction
from service.storage.times import from_db_time

log = logging.getLogger(__name__)

SHARED_FIELDS: Final = (
    "enabled", "session_tokens", "weekly_tokens", "max_run_tokens", "reviewer_share_pct",
)


def default_authority() -> str:
    """The label a process publishes under unless told otherwise: one per host."""
    return f"pr-review-agent@{socket.gethostname()}"


def shared_of(config: BudgetConfig) -> dict[str, object]:
    """The five shared fields of ``config``."""
    return {name: getattr(config, name) for name in SHARED_FIELDS}


def policy_text(config: BudgetConfig) -> str:
    """The JSON the row stores for ``config`` (stable: sorted keys, no spaces)."""
    return json.dumps(shared_of(config), sort_keys=True, separators=(",", ":"))


def parse_policy(text: str) -> dict[str, object]:
    """The five fields of a stored policy, checked as strictly as the config file checks
    them; ``ValueError`` (never quoting more than a field name) when they are not."""
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError("the policy is not JSON") from None
    if not isinstance(data, dict) or set(data) != set(SHARED_FIELDS):
        raise ValueError(f"the policy must have exactly the fields {', '.join(SHARED_FIELDS)}")
    if not isinstance(data["enabled"], bool):
        raise ValueError("the policy's enabled must be true or false")
    for name in SHARED_FIELDS[1:]:
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"the policy's {name} must be an integer of at least 1")
    if data["reviewer_share_pct"] > 100:
        raise ValueError("the policy's reviewer_share_pct must be at most 100")
    return {name: data[name] for name in SHARED_FIELDS}


@dataclass(frozen=True)
class Policy:
    """The shared policy row as read, and what it means for this process."""

    authority: str
    written_at: datetime | None
    text: str
    fields: dict[str, object] | None  # None when the row could not be read
    error: str | None = None

    def apply(self, local: BudgetConfig) -> BudgetConfig:
        """``local`` with the shared fields taken from the row (unchanged if unreadable)."""
        if self.fields is None:
            return local
        return dataclasses.replace(local, **self.fields)  # type: ignore[arg-type]

    def overrides(self, local: BudgetConfig) -> bool:
        """True when the row's shared fields differ from ``local``'s."""
        return self.fields is not None and self.fields != shared_of(local)


def read_policy(conn: Transaction) -> Policy | None:
    """The row, or None when no process has published one yet.

    A row that cannot be read (edited by hand) comes back with ``fields=None`` and an
    ``error``: the caller then keeps its own, validated config rather than guessing.
    """
    row = budget_state.read_policy(conn)
    if row is None:
        return None
    authority, text, written_at = row.authority, row.policy, row.written_at
    fields: dict[str, object] | None = None
    error: str | None = None
    try:
        fields = parse_policy(text)
        shared = BudgetConfig(**fields)  # type: ignore[arg-type]
        if shared.max_run_tokens > min(shared.session_limit, shared.daily_limit):
            # The loader refuses such a config; a row that slipped past it is refused
            # the same way rather than silently admitting nothing.
            raise ValueError("the policy's max_run_tokens does not fit its smallest window")
    except ValueError as exc:
        fields, error = None, str(exc)
    try:
        written: datetime | None = from_db_time(written_at)
    except ValueError:
        written = None
    return Policy(authority=authority, written_at=written, text=text, fields=fields,
                  error=error)


def publish(conn: Transaction, config: BudgetConfig, *, authority: str,
            now: datetime, replace: bool) -> bool:
    """Write ``config``'s shared fields as the policy; True if the row was written.

    ``replace=False`` writes only when no row exists (the first process to start wins).
    """
    return budget_state.publish_policy(conn, authority=authority, policy=policy_text(config),
                                       now=now, replace=replace)


class DisagreementLog:
    """Logs, once per (row, local config) pair, that a process obeys a policy row that
    disagrees with its own config, or that the row cannot be read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: tuple[str, str] | None = None

    def note(self, policy: Policy | None, local: BudgetConfig) -> None:
        if policy is None or not (policy.error or policy.overrides(local)):
            return
        pair = (policy.text, policy_text(local))
        with self._lock:
            if self._last == pair:
                return
            self._last = pair
        if policy.error:
            log.error("the shared budget policy cannot be read (%s); using this process's "
                      "own config", policy.error, extra={"authority": policy.authority})
        else:
            log.warning("this process's budget config disagrees with the shared policy "
                        "published by %s; obeying the policy: %s", policy.authority,
                        policy.text, extra={"authority": policy.authority})
