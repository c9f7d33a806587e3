"""What ``GET /healthz`` reports: a registry the running components report into.

Components call in as things happen -- the poller after each successful cycle, each worker
when it starts and when it dies, the GitHub edge after each App authentication or token
mint -- and ``Health.report(now)`` turns the latest of each into checks, plus live reads
of the store (reachable, and at the schema version this code writes) and of the budget's
circuit breaker (which lives in the store, so every process sees a trip). Reports may
come from any thread.

Each check has a ``status``: ``ok``, ``degraded``, ``failing``, or ``not running in this
process`` for a component whose role this process does not run. Only the store can make
the whole report ``failing`` (the endpoint then answers 503): without the store nothing
works, whereas a stale poller or a dead worker still leaves webhooks being accepted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final, Literal

from service.storage.database import Database
from service.storage.errors import STORE_ERRORS

log = logging.getLogger(__name__)

_UNREACHABLE: Final[tuple[type[Exception], ...]] = (*STORE_ERRORS, OSError)

Status = Literal["ok", "degraded", "failing"]
OK: Final = "ok"
DEGRADED: Final = "degraded"
FAILING: Final = "failing"
NOT_RUNNING: Final = "not running in this process"

#: A poller whose last successful cycle is older than this many intervals is degraded.
STALE_INTERVALS: Final = 3


def _aware(now: datetime) -> datetime:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("health reports take an aware datetime, not a naive one")
    return now


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


@dataclass
class _Poller:
    interval: timedelta
    started_at: datetime
    last_cycle_at: datetime | None = None
    standby_at: datetime | None = None  # last seen standing by for another process


@dataclass
class _Workers:
    expected: int
    alive: set[str] = field(default_factory=set)
    dead: dict[str, str] = field(default_factory=dict)  # name -> why


@dataclass
class _Event:
    at: datetime
    detail: str | None = None


class Health:
    """The registry. ``Health(store)``; components report, ``report(now)`` reads.

    ``report`` touches the store, so async callers run it in a worker thread.
    """

    def __init__(self, store: Database, *, expected_version: int | None = None,
                 breaker_probe: Callable[[datetime], tuple[bool, datetime | None]] | None = None
                 ) -> None:
        self._store = store
        # The breaker lives in the shared store, so it is read at report time rather
        # than pushed: a web-only process sees a trip another process recorded.
        self._breaker_probe = breaker_probe
        self._expected_version = (store.head_version if expected_version is None
                                  else expected_version)
        self._lock = threading.Lock()
        self._poller: _Poller | None = None
        self._workers: _Workers | None = None
        self._auth_ok: _Event | None = None
        self._auth_failed: _Event | None = None
        self._engine_ok: _Event | None = None
        self._engine_failed: _Event | None = None
        self._checks_started = False
        self._checks_forbidden: dict[int, _Event] = {}  # installation -> when, and why
        self._reload_refused: _Event | None = None

    # -- reports from components ---------------------------------------------------------

    def poller_started(self, interval: timedelta, now: datetime) -> None:
        """This process runs the poller, every ``interval``."""
        if interval <= timedelta(0):
            raise ValueError("the poll interval must be positive")
        with self._lock:
            self._poller = _Poller(interval=interval, started_at=_aware(now))

    def poller_cycle_succeeded(self, now: datetime) -> None:
        """A poll cycle finished without error at ``now``."""
        with self._lock:
            if self._poller is None:
                raise RuntimeError("poller_cycle_succeeded before poller_started")
            self._poller.last_cycle_at = _aware(now)
            self._poller.standby_at = None

    def poller_standing_by(self, now: datetime) -> None:
        """Another process polls this store; this one checked at ``now`` and stands by."""
        with self._lock:
            if self._poller is None:
                raise RuntimeError("poller_standing_by before poller_started")
            self._poller.standby_at = _aware(now)

    def workers_started(self, names: list[str]) -> None:
        """This process runs these workers (all alive now)."""
        with self._lock:
            self._workers = _Workers(expected=len(names), alive=set(names))

    def worker_died(self, name: str, reason: str) -> None:
        """Worker ``name`` ended when it should not have; ``reason`` is safe to show."""
        with self._lock:
            if self._workers is None:
                raise RuntimeError("worker_died before workers_started")
            self._workers.alive.discard(name)
            self._workers.dead[name] = reason

    def worker_restarted(self, name: str) -> None:
        """A supervisor replaced a dead worker under the same name."""
        with self._lock:
            if self._workers is None:
                raise RuntimeError("worker_restarted before workers_started")
            self._workers.dead.pop(name, None)
            self._workers.alive.add(name)

    def auth_succeeded(self, now: datetime, what: str) -> None:
        """GitHub accepted the App's credentials (``what``: "app jwt", "installation token")."""
        with self._lock:
            self._auth_ok = _Event(_aware(now), what)

    def auth_failed(self, now: datetime, reason: str) -> None:
        """Authenticating to GitHub failed; ``reason`` must carry no credential."""
        with self._lock:
            self._auth_failed = _Event(_aware(now), reason)

    def engine_ran(self, now: datetime) -> None:
        """An engine run started (whatever it then found): the engine can be run."""
        with self._lock:
            self._engine_ok = _Event(_aware(now))

    def engine_unavailable(self, now: datetime, reason: str) -> None:
        """The engine could not be started (``reason``: no secret in it)."""
        with self._lock:
            self._engine_failed = _Event(_aware(now), reason)

    def reload_refused(self, now: datetime, reason: str) -> None:
        """A SIGHUP's file was refused: the previous config runs on, degraded until a
        good reload (the operator believes a change is in force that is not)."""
        with self._lock:
            self._reload_refused = _Event(_aware(now), reason)

    def reload_applied(self) -> None:
        with self._lock:
            self._reload_refused = None

    def check_runs_started(self) -> None:
        """This process pushes check runs to GitHub."""
        with self._lock:
            self._checks_started = True

    def check_runs_forbidden(self, installation: int, now: datetime, detail: str) -> None:
        """GitHub refused ``installation``'s check runs (403): the App's ``checks: write``
        permission is not granted there yet. Reviews still run and post."""
        with self._lock:
            self._checks_forbidden[installation] = _Event(_aware(now), detail)

    def check_runs_allowed(self, installation: int) -> None:
        """A check run of ``installation`` went through."""
        with self._lock:
            self._checks_forbidden.pop(installation, None)

    # -- the report ------------------------------------------------------------------------

    def report(self, now: datetime) -> dict[str, object]:
        """``{"status": ..., "checks": {...}}`` at ``now`` (reads the store)."""
        _aware(now)
        checks: dict[str, dict[str, object]] = {"store": self._store_check()}
        # The lock guards the reports in memory only, and is never held across a store
        # call: components report from the event loop, and a store that hangs (an outage
        # waits out the pool's timeout) must not make the loop wait for this lock.
        with self._lock:
            checks["poller"] = self._poller_check(now)
            checks["workers"] = self._workers_check()
            checks["github_auth"] = self._auth_check()
            checks["engine"] = self._engine_check()
            checks["check_runs"] = self._check_runs_check()
            checks["config"] = self._config_check()
        reachable = "schema_version" in checks["store"]
        checks["breaker"] = self._breaker_check(now, store_up=reachable)
        # An engine that cannot start fails its own check, but the process stays ready:
        # it still takes webhooks and queues them for when the engine is back.
        statuses = {DEGRADED if name == "engine" and check["status"] == FAILING
                    else check["status"] for name, check in checks.items()}
        status: Status = (
            FAILING if FAILING in statuses else DEGRADED if DEGRADED in statuses else OK
        )
        return {"status": status, "checks": checks}

    def _store_check(self) -> dict[str, object]:
        try:
            version = self._store.version
        except _UNREACHABLE as exc:
            log.warning("health check: store unreachable", extra={"error": type(exc).__name__})
            return {"status": FAILING, "error": f"store unreachable ({type(exc).__name__})"}
        check: dict[str, object] = {
            "status": OK, "schema_version": version, "expected_version": self._expected_version
        }
        if version != self._expected_version:
            check["status"] = FAILING
            check["error"] = (
                f"store is at schema version {version}, this code writes "
                f"{self._expected_version}"
            )
        return check

    def _poller_check(self, now: datetime) -> dict[str, object]:
        poller = self._poller
        if poller is None:
            return {"status": NOT_RUNNING}
        stale_after = poller.interval * STALE_INTERVALS
        if poller.standby_at is not None:  # healthy for as long as it keeps asking
            age = now - poller.standby_at
            return {"status": OK if age <= stale_after else DEGRADED, "standby": True,
                    "interval_seconds": poller.interval.total_seconds(),
                    "last_cycle_at": _iso(poller.last_cycle_at),
                    "checked_at": _iso(poller.standby_at)}
        since = poller.last_cycle_at or poller.started_at
        age = now - since
        check: dict[str, object] = {
            "status": OK if age <= stale_after else DEGRADED,
            "interval_seconds": poller.interval.total_seconds(),
            "last_cycle_at": _iso(poller.last_cycle_at),
            "age_seconds": None if poller.last_cycle_at is None else age.total_seconds(),
        }
        if check["status"] == DEGRADED:
            what = "no successful cycle" if poller.last_cycle_at is None else "last cycle"
            check["detail"] = (
                f"{what} for {int(age.total_seconds())} s, more than {STALE_INTERVALS} intervals"
            )
        return check

    def _workers_check(self) -> dict[str, object]:
        workers = self._workers
        if workers is None:
            return {"status": NOT_RUNNING}
        return {
            "status": OK if not workers.dead else DEGRADED,
            "alive": len(workers.alive),
            "expected": workers.expected,
            "dead": dict(sorted(workers.dead.items())),
        }

    def _breaker_check(self, now: datetime, *, store_up: bool) -> dict[str, object]:
        if self._breaker_probe is not None and not store_up:
            # The breaker lives in the store: asking it again would only wait out the
            # same outage a second time.
            return {"status": DEGRADED, "tripped": None,
                    "detail": "breaker state unreadable: the store is unreachable"}
        if self._breaker_probe is not None:
            try:
                tripped, until = self._breaker_probe(now)
            except Exception as exc:  # an unreadable breaker admits nothing: say so
                return {"status": DEGRADED, "tripped": None,
                        "detail": f"breaker state unreadable: {type(exc).__name__}"}
            return {"status": DEGRADED if tripped else OK, "tripped": tripped,
                    "until": None if until is None else until.isoformat()}
        return {"status": OK, "tripped": False}  # no budget in this process to read

    def _engine_check(self) -> dict[str, object]:
        if self._workers is None:
            return {"status": NOT_RUNNING}
        ok, failed = self._engine_ok, self._engine_failed
        check: dict[str, object] = {
            "status": OK,
            "last_run_at": None if ok is None else ok.at.isoformat(),
            "last_failure_at": None if failed is None else failed.at.isoformat(),
            "last_failure": None if failed is None else failed.detail,
        }
        if failed is not None and (ok is None or failed.at >= ok.at):
            check["status"] = FAILING
        return check

    def _check_runs_check(self) -> dict[str, object]:
        if not self._checks_started:
            return {"status": NOT_RUNNING}
        forbidden = {str(i): {"since": e.at.isoformat(), "detail": e.detail}
                     for i, e in sorted(self._checks_forbidden.items())}
        if not forbidden:
            return {"status": OK}
        return {"status": DEGRADED, "forbidden": forbidden,
                "detail": "the App's checks: write permission is not granted on these "
                          "installations: accept it in the installation's settings (reviews "
                          "still run and post)"}

    def _config_check(self) -> dict[str, object]:
        refused = self._reload_refused
        if refused is None:
            return {"status": OK}
        return {"status": DEGRADED, "reload_refused_at": refused.at.isoformat(),
                "detail": f"the last reload (SIGHUP) was refused, so the config in force is "
                          f"the one before it: {refused.detail}"}

    def _auth_check(self) -> dict[str, object]:
        ok, failed = self._auth_ok, self._auth_failed
        check: dict[str, object] = {
            "status": OK,
            "last_success_at": None if ok is None else ok.at.isoformat(),
            "last_success": None if ok is None else ok.detail,
            "last_failure_at": None if failed is None else failed.at.isoformat(),
            "last_failure": None if failed is None else failed.detail,
        }
        if failed is not None and (ok is None or failed.at >= ok.at):
            check["status"] = DEGRADED
        return check
