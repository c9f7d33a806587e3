"""Chaos with a loss accounting: ``serve --role all`` killed with SIGKILL and restarted
while 50 triggers arrive, then every trigger classified (``tests/chaos/accounting.py``).

The real processes: ``python -m service serve`` against ``python -m tests.chaos.simserver``
(the standalone simulator) and the fake ``claude`` with random durations and token
counts (``tests/chaos/claude_chaos.py``). About a minute; the larger run is
``python -m tests.bench.bench_chaos``. On failure the message holds the seed (rerun it
with ``ChaosSettings(seed=…)``) and the classification.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.driver import ChaosSettings, describe, run_chaos


@pytest.mark.slow
def test_nothing_lost_nothing_twice_no_window_breached_under_sigkill(tmp_path: Path) -> None:
    result = run_chaos(tmp_path / "chaos", ChaosSettings(triggers=50))
    report = result.report
    story = describe(result)

    assert len(report.verdicts) == 50, story
    assert report.count("lost") == 0, story
    assert report.count("unfinished") == 0, story
    assert report.posted_twice == {}, story
    assert report.notices_twice == {}, story
    assert report.undercharged == [], story
    assert report.window_breaches == [], story
    assert report.stray_engine_runs == 0, story
    assert report.problems == [], story
    assert report.ok, story
    # Every trigger ended visibly: posted exactly once, an honest recorded ending, or
    # abandoned with its attempts on record.
    assert sum(report.counts.values()) == 50, story
    # The run was what it claims to be: kills, both ingest paths, a budget that bound.
    assert result.kills >= 3, story
    assert {v.trigger.via for v in report.verdicts} == {"webhook", "poll"}, story
    assert {v.found_by for v in report.verdicts} == {"webhook", "poller"}, story
    assert result.refusals > 0, story
    assert result.peak_before_switch <= result.tight_limit, story
    assert result.final_exit == 0, story
