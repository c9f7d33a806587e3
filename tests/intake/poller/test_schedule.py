"""Which repositories a cycle polls (``schedule``, pure): the sweep's interval and quota
from the installation's limit, hinted repositories first, and — pinned as properties —
no repository starved past its bound, and the sweep never over its share."""

from __future__ import annotations

import math
from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from service.intake.poller.schedule import (
    POLL_COST,
    POLL_SHARE,
    choose,
    hinted,
    sweep_interval,
    sweep_quota,
)
from tests.kit.thorough import examples
from tests.queue_helpers import T0

CYCLE = timedelta(minutes=5)


def test_the_sweep_is_the_cycle_until_the_share_cannot_pay_for_it() -> None:
    assert sweep_interval(10, 5_000, CYCLE) == CYCLE  # 30 an hour of 500
    assert sweep_interval(1_000, 12_500, CYCLE) == timedelta(hours=2.4)
    assert sweep_interval(10_000, 12_500, CYCLE) == timedelta(hours=24)
    assert sweep_quota(10_000, timedelta(hours=24), CYCLE) == 35
    assert sweep_quota(10, CYCLE, CYCLE) == 10 and sweep_quota(0, CYCLE, CYCLE) == 0


def test_hinted_first_newest_activity_first_then_the_longest_unpolled() -> None:
    last = {"o/a": T0, "o/b": T0 - timedelta(hours=3), "o/c": T0 - timedelta(hours=2)}
    now = T0 + timedelta(hours=1)
    hints = hinted({"o/a": now - timedelta(minutes=1), "o/c": T0 - timedelta(hours=3),
                    "o/x": now}, last)
    assert hints == {"o/a": now - timedelta(minutes=1), "o/x": now}  # o/c: seen since
    names = ["o/a", "o/b", "o/c", "o/d", "o/x"]
    assert choose(names, last, hints, now, sweep=timedelta(hours=2), quota=2) == [
        "o/x", "o/a", "o/d", "o/b"]  # o/d never polled, then o/b (4 h ago); o/c waits
    # A hint in the same second as the last poll still asks for one.
    assert hinted({"o/a": T0}, last) == {"o/a": T0}


@settings(max_examples=examples(200), deadline=None)
@given(st.integers(1, 3_000), st.integers(5_000, 12_500),
       st.lists(st.sets(st.integers(0, 2_999), max_size=20), min_size=1, max_size=40))
def test_no_repository_waits_past_twice_its_sweep_and_the_sweep_keeps_its_share(
        count: int, limit: int, hints_per_cycle: list[set[int]]) -> None:
    names = [f"o/r{i}" for i in range(count)]
    sweep = sweep_interval(count, limit, CYCLE)
    quota = sweep_quota(count, sweep, CYCLE)
    cycles_per_sweep = math.ceil(sweep / CYCLE)
    per_hour = timedelta(hours=1) / CYCLE
    # The sweep's polls an hour stay within the share, but for one poll of rounding a cycle.
    assert quota * POLL_COST * per_hour <= limit * POLL_SHARE + POLL_COST * per_hour
    last: dict[str, object] = {}
    now = T0
    # Enough cycles to see every repository through two sweeps, the hints repeating.
    for cycle in range(2 * cycles_per_sweep + 2):
        hints = {names[i]: now for i in hints_per_cycle[cycle % len(hints_per_cycle)]
                 if i < count}
        chosen = choose(names, last, hinted(hints, last), now,  # type: ignore[arg-type]
                        sweep=sweep, quota=quota)
        swept = [r for r in chosen if r not in hints]
        assert len(swept) <= quota
        for repo in chosen:
            last[repo] = now
        now += CYCLE
    assert len(last) == count  # every repository was polled
    assert all(now - at <= 2 * sweep + CYCLE for at in last.values())  # type: ignore[operator]
