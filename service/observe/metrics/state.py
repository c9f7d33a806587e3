"""Figures that are state, read from the store when Prometheus scrapes.

The queue and the budget live in the store every process and host shares, so reading
them at scrape time gives one true answer from any replica, whoever did the work (a
counter kept in one process would only know that process's share). Dashboards take
``max`` of these across instances, not ``sum``. A store that cannot be read yields no
state series and ``pr_review_agent_store_up 0``: the scrape itself still succeeds, so the
process's own counters are not lost with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from service.budget.ladder import Mode
from service.storage import ledger
from service.storage import queue as queue_table
from service.storage.database import Database
from service.storage.queue import STATUSES

from .instruments import PREFIX

if TYPE_CHECKING:  # the governor counts into service.observe.metrics: no import cycle at run time
    from service.budget.governor import Governor
    from service.budget.snapshot import Snapshot

__all__ = ["StoreState"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
#: The runs the estimate's accuracy is taken over.
ESTIMATE_WINDOW = timedelta(days=1)
_MICRO = 1_000_000


class StoreState(Collector):
    """A ``prometheus_client`` collector of the queue and the budget as they stand."""

    def __init__(self, store: Database, governor: Governor, clock: Clock) -> None:
        self._store = store
        self._governor = governor
        self._clock = clock

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # no fixed description: the families depend on what the store holds

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily(f"{PREFIX}_store_up",
                               "1 when the store answered this scrape, else 0.")
        try:
            with self._store.read() as tx:
                depth = queue_table.depth(tx)
                guessed = ledger.estimates(tx, self._clock() - ESTIMATE_WINDOW)
            snapshot = self._governor.snapshot(self._clock())
        except Exception as exc:  # any store failure: say so, keep the scrape
            log.warning("metrics: the store could not be read",
                        extra={"error": type(exc).__name__})
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield _queue(depth)
        yield from _budget(snapshot)
        yield from _estimates(guessed)


def _estimates(rows: list[tuple[str, int, int, int]]) -> Iterator[GaugeMetricFamily]:
    ratio = GaugeMetricFamily(
        f"{PREFIX}_estimate_ratio", "What the last day's completed runs cost over what the "
        "pre-flight estimate said, by engine (1: exact; under 1: the estimate errs high, as "
        "it should).", labels=["engine"])
    runs = GaugeMetricFamily(f"{PREFIX}_estimate_runs", "Completed runs the ratio is "
                             "taken over, by engine.", labels=["engine"])
    for engine, count, used, guessed in rows:
        ratio.add_metric([engine], used / guessed)
        runs.add_metric([engine], count)
    yield ratio
    yield runs


def _queue(depth: list[tuple[str, str, int]]) -> GaugeMetricFamily:
    rows = GaugeMetricFamily(f"{PREFIX}_queue_rows", "Queue rows by status and kind "
                             "(pr_opened, mention, ask).",
                             labels=["status", "kind"])
    seen = {(status, kind): n for status, kind, n in depth}
    for status in STATUSES:  # every status present, at 0 when empty, so alerts see it
        for kind in sorted({k for _, k, _ in depth} | {"pr_opened", "mention", "ask"}):
            rows.add_metric([status, kind], seen.get((status, kind), 0))
    return rows


def _budget(snap: Snapshot) -> Iterator[GaugeMetricFamily]:
    def family(name: str, doc: str, labels: tuple[str, ...] = ("window",)) -> GaugeMetricFamily:
        return GaugeMetricFamily(f"{PREFIX}_budget_{name}", doc, labels=list(labels))

    limit = family("limit_tokens", "Each window's effective token limit (after calibration).")
    spent = family("spent_tokens", "Tokens settled in each window.")
    reserved = family("reserved_tokens", "Tokens held by open reservations in each window.")
    ratio = family("utilisation_ratio", "(spent + reserved) / limit for each window.")
    dollars = family("spent_dollars", "Dollars reported spent in each window (the monthly "
                     "window included when dollars are tracked).")
    frees = family("frees_at_seconds", "When the oldest charge in each window ages out "
                   "(Unix seconds; absent when the window is empty).")
    for w in snap.windows:
        limit.add_metric([w.name], w.limit)
        spent.add_metric([w.name], w.spent)
        reserved.add_metric([w.name], w.reserved)
        ratio.add_metric([w.name], w.utilisation)
        dollars.add_metric([w.name], snap.window_usd.get(w.name, 0) / _MICRO)
        if w.frees_at is not None:
            frees.add_metric([w.name], w.frees_at.timestamp())
    monthly = snap.monthly
    if monthly is not None:
        dollars.add_metric(["monthly"], monthly.charged_micro / _MICRO)
    yield from (limit, spent, reserved, ratio, dollars, frees)
    if monthly is not None and monthly.limit_micro is not None:
        cap = GaugeMetricFamily(f"{PREFIX}_budget_monthly_limit_dollars",
                                "The trailing 30-day dollar limit.")
        cap.add_metric([], monthly.limit_micro / _MICRO)
        yield cap
    rung = family("rung", "1 for the ladder rung in force, 0 for the others.", ("rung",))
    for mode in Mode:
        rung.add_metric([mode.value], 1 if mode is snap.mode else 0)
    yield rung
    enabled = GaugeMetricFamily(f"{PREFIX}_budget_enabled", "1 when reviews may be admitted.")
    enabled.add_metric([], 1 if snap.enabled else 0)
    yield enabled
    breaker = GaugeMetricFamily(f"{PREFIX}_budget_breaker_tripped",
                                "1 while the usage-limit circuit breaker is open.")
    breaker.add_metric([], 1 if snap.breaker.tripped else 0)
    yield breaker
    calibrated = GaugeMetricFamily(f"{PREFIX}_budget_calibrated_percent",
                                   "The limits' calibration after usage-limit trips (100: "
                                   "as configured).")
    calibrated.add_metric([], snap.breaker.effective_pct)
    yield calibrated
