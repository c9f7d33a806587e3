"""Chaos with a loss accounting: ``serve --role all`` killed with SIGKILL and restarted
while triggers arrive, then every trigger classified (``tests/chaos/accounting.py``).

The real processes: ``python -m service serve`` against ``python -m tests.simulator``
(the standalone simulator) and the fake ``claude`` with random durations and token
counts (``tests/chaos/claude_chaos.py``). One host on the SQLite file; two hosts (two
``serve`` processes, own configs and ports) on one PostgreSQL database, webhooks sent to
either at random, either killed, and the database server restarted under them. About a
minute each; the larger run is ``python -m tests.bench.bench_chaos``. On failure the
message holds the seed (rerun it with ``ChaosSettings(seed=…)``) and the classification.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from tests.chaos.driver import ChaosResult, ChaosSettings, describe, run_chaos
from tests.chaos.rig import RigSettings
from tests.databases import as_url, private_cluster
from tests.kit.thorough import THOROUGH

#: Triggers per run: CI's full number (``tests/kit/thorough.py``), two fifths on a
#: developer's machine. The phases are timed, not counted (triggers arrive over 20 s,
#: kills fall for 26 s), so a smaller run has the same kills, both ingest paths (the
#: schedule assigns them) and a window that must bind (``tight_session`` is sized from the
#: count): what is asserted holds either way, and the run costs the machine less (the two
#: runs were a quarter of the suite's CPU at three fifths).
ONE_HOST, TWO_HOSTS = (50, 40) if THOROUGH else (20, 16)


def assert_nothing_lost_twice_or_breached(result: ChaosResult, triggers: int) -> None:
    report = result.report
    story = describe(result)
    assert len(report.verdicts) == triggers, story
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
    assert sum(report.counts.values()) == triggers, story
    # The run was what it claims to be: kills, both ingest paths, a budget that bound.
    assert result.kills >= 3, story
    assert {v.trigger.via for v in report.verdicts} == {"webhook", "poll"}, story
    assert {v.found_by for v in report.verdicts} == {"webhook", "poller"}, story
    assert result.refusals > 0, story
    assert result.peak_before_switch <= result.tight_limit, story
    assert result.final_exit == 0, story


@pytest.mark.slow(90)
def test_nothing_lost_nothing_twice_no_window_breached_under_sigkill(tmp_path: Path) -> None:
    result = run_chaos(tmp_path / "chaos", ChaosSettings(triggers=ONE_HOST))
    assert_nothing_lost_twice_or_breached(result, ONE_HOST)


@pytest.mark.slow(70)
def test_two_hosts_on_postgresql_under_sigkill_and_a_database_restart(tmp_path: Path) -> None:
    """Two ``serve`` processes on one database (a server of the test's own, so that
    restarting it disturbs no other test): either killed at random, webhooks to either,
    and the database server itself restarted twice under them."""
    with private_cluster() as cluster:
        with psycopg.connect(cluster.conninfo, autocommit=True) as admin:
            admin.execute("CREATE DATABASE chaos TEMPLATE template0 ENCODING 'UTF8'")
        url, password = as_url(make_conninfo(cluster.conninfo, dbname="chaos"))
        result = run_chaos(tmp_path / "chaos", ChaosSettings(
            triggers=TWO_HOSTS, database_restarts=(6.0, 14.0),
            restart_database=cluster.restart,
            rig=RigSettings(hosts=2, store_url=url, store_password=password)))
    assert_nothing_lost_twice_or_breached(result, TWO_HOSTS)
    assert result.database_restarts == 2, describe(result)
    # Nothing crashed for want of its database: every exit was a kill.
    assert result.crashes == [], describe(result)
    # The first kill took the poller's leader: the other host's standby took over.
    assert result.poller_leaders == {0, 1}, describe(result)
    assert result.poller_takeovers >= 1, describe(result)
