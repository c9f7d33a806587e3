"""The ladder's rungs switch at exactly 60 %, 85 % and 100 % of the worst gauge."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from service.budget.ladder import Mode, first_at, mode_for


@dataclass(frozen=True)
class Gauge:
    """A window at ``charged`` of ``limit``, compared in integers as the real ones are."""

    name: str
    charged: int
    limit: int = 1000

    def at_least(self, pct: int) -> bool:
        return self.charged * 100 >= pct * self.limit


@pytest.mark.parametrize(("charged", "mode"), [
    (0, Mode.FULL), (599, Mode.FULL), (600, Mode.REDUCED), (849, Mode.REDUCED),
    (850, Mode.MENTION_ONLY), (999, Mode.MENTION_ONLY), (1000, Mode.EXHAUSTED),
    (5000, Mode.EXHAUSTED),
])
def test_each_rung_starts_exactly_at_its_percentage(charged: int, mode: Mode) -> None:
    assert mode_for([Gauge("session", charged)]) is mode


def test_the_worst_gauge_decides() -> None:
    gauges = [Gauge("session", 100), Gauge("weekly", 900), Gauge("daily", 650)]
    assert mode_for(gauges) is Mode.MENTION_ONLY
    assert mode_for(iter(gauges)) is Mode.MENTION_ONLY  # read once, whatever the iterable
    assert mode_for([]) is Mode.FULL


def test_only_the_full_rung_asks_for_a_full_review() -> None:
    assert [m.engine_mode for m in Mode] == ["full", "reduced", "reduced", "reduced"]


def test_the_gauge_named_in_a_refusal_is_the_first_at_the_percentage() -> None:
    gauges = [Gauge("session", 100), Gauge("weekly", 1000), Gauge("daily", 1200)]
    found = first_at(gauges, 100)
    assert found is not None and found.name == "weekly"
    assert first_at(gauges, 101) is not None and first_at(gauges, 121) is None
