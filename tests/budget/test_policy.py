"""One shared budget policy: every process on a store obeys the one ``budget_policy`` row."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.budget.governor import Governor
from service.budget.policy import SHARED_FIELDS, parse_policy, read_policy
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests.kit.queue import QueueDriver
from tests.queue_helpers import LEASE, T0, budget, mention

WRITTEN = T0.replace(hour=8)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[SqliteStore, SqliteStore]]:
    """Two processes' stores on one file."""
    with SqliteStore(tmp_path / "s.db") as a, SqliteStore(tmp_path / "s.db") as b:
        yield a, b


def row(store: SqliteStore) -> tuple[str, dict[str, object], str]:
    with store.read() as conn:
        authority, policy, written = conn.execute(
            "SELECT authority_repo, policy, written_at FROM budget_policy").fetchone()
    return authority, json.loads(policy), written


def disagreements(caplog: pytest.LogCaptureFixture) -> int:
    return sum("disagrees with the shared policy" in r.getMessage() for r in caplog.records)


def test_the_first_governor_publishes_its_config(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        Governor(store, budget(session_tokens=120_000), authority="alpha",
                 clock=lambda: WRITTEN)
        authority, policy, written = row(store)
    assert authority == "alpha" and written == to_db_time(WRITTEN)
    assert policy == {"enabled": True, "session_tokens": 120_000, "weekly_tokens": 7_000_000,
                      "max_run_tokens": 10_000, "reviewer_share_pct": 100}


def test_the_default_authority_names_the_host(tmp_path: Path) -> None:
    import socket
    with SqliteStore(tmp_path / "s.db") as store:
        gov = Governor(store, budget())
        assert gov.authority == f"pr-review-agent@{socket.gethostname()}"
        assert row(store)[0] == gov.authority


def test_two_governors_with_different_configs_obey_the_row(
        two: tuple[SqliteStore, SqliteStore], caplog: pytest.LogCaptureFixture) -> None:
    a, b = two
    wide = budget(session_tokens=30_000, max_run_tokens=10_000)
    narrow = budget(session_tokens=10_000, max_run_tokens=10_000, max_reviews_per_pr=1)
    with caplog.at_level(logging.WARNING, logger="service.budget"):
        ga = Governor(a, wide, authority="alpha", clock=lambda: WRITTEN)
        gb = Governor(b, narrow, authority="beta", clock=lambda: WRITTEN)
        qa, qb = QueueDriver(a, lease=LEASE), QueueDriver(b, lease=LEASE)
        for n in range(1, 5):
            qa.enqueue(mention(n, n), now=T0)
        # Three runs fit the row's 30 000-token session, whichever process claims them:
        # process b's own 10 000 would have admitted one.
        claims = [qb.claim(now=T0, owner="b1", admit=gb.admit),
                  qa.claim(now=T0, owner="a1", admit=ga.admit),
                  qb.claim(now=T0, owner="b2", admit=gb.admit),
                  qa.claim(now=T0, owner="a2", admit=ga.admit)]
        assert [c is not None for c in claims] == [True, True, True, False]
        snap = gb.snapshot(T0)
    assert snap.windows[0].limit == 30_000
    assert snap.max_reviews_per_pr == 1  # process-local keys stay process-local
    assert snap.policy.authority == "alpha" and snap.policy.overrides_local is True
    assert ga.snapshot(T0).policy.overrides_local is False
    # b logged its disagreement once, across many claims and a snapshot; a never did.
    assert disagreements(caplog) == 1
    assert all("beta" not in r.getMessage() for r in caplog.records)


def test_the_authority_republishes_on_reload_and_others_do_not(
        two: tuple[SqliteStore, SqliteStore], caplog: pytest.LogCaptureFixture) -> None:
    a, b = two
    ga = Governor(a, budget(session_tokens=30_000), authority="alpha")
    gb = Governor(b, budget(session_tokens=20_000), authority="beta")
    gb.config = budget(session_tokens=50_000)  # SIGHUP on a non-authority: stays local
    assert row(a)[1]["session_tokens"] == 30_000
    ga.config = budget(session_tokens=40_000)  # SIGHUP on the authority: the policy
    assert row(a)[1]["session_tokens"] == 40_000
    assert gb.snapshot(T0).windows[0].limit == 40_000
    assert gb.config.session_tokens == 50_000  # its own config is kept, and shown as such


def test_publish_policy_replaces_the_row_and_takes_authority(
        two: tuple[SqliteStore, SqliteStore]) -> None:
    a, b = two
    Governor(a, budget(session_tokens=30_000), authority="alpha")
    gb = Governor(b, budget(session_tokens=20_000), authority="beta")
    gb.publish_policy()
    assert row(a)[0] == "beta" and row(a)[1]["session_tokens"] == 20_000
    assert gb.snapshot(T0).policy.overrides_local is False


def test_a_read_only_governor_never_publishes(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        gov = Governor(store, budget(), publish=False)
        gov.config = budget(session_tokens=5_000_000)
        with store.read() as conn:
            assert read_policy(conn) is None
        assert gov.snapshot(T0).policy.authority is None


def test_disabled_in_the_row_stops_every_process(two: tuple[SqliteStore, SqliteStore]) -> None:
    a, b = two
    Governor(a, budget(enabled=False), authority="alpha")
    gb = Governor(b, budget(), authority="beta")
    q = QueueDriver(b, lease=LEASE)
    q.enqueue(mention(1, 1), now=T0)
    assert q.claim(now=T0, owner="b", admit=gb.admit) is None
    assert gb.refusals["mention:o/r:1:1"].reason == "disabled"
    assert gb.snapshot(T0).enabled is False


@pytest.mark.parametrize("text", [
    "not json",
    '{"enabled": true}',
    '{"enabled": 1, "session_tokens": 1, "weekly_tokens": 1, "max_run_tokens": 1,'
    ' "reviewer_share_pct": 1}',
    '{"enabled": true, "session_tokens": true, "weekly_tokens": 1, "max_run_tokens": 1,'
    ' "reviewer_share_pct": 1}',
    '{"enabled": true, "session_tokens": 1, "weekly_tokens": 1, "max_run_tokens": 1,'
    ' "reviewer_share_pct": 101}',
    '{"enabled": true, "session_tokens": 100, "weekly_tokens": 700, "max_run_tokens": 500,'
    ' "reviewer_share_pct": 100}',  # the run does not fit the windows
])
def test_an_unreadable_row_keeps_the_local_config_and_says_so_once(
        tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture) -> None:
    with SqliteStore(tmp_path / "s.db") as store:
        gov = Governor(store, budget(session_tokens=30_000, max_run_tokens=10_000))
        with store.transaction() as conn:
            conn.execute("UPDATE budget_policy SET policy = ?", (text,))
        q = QueueDriver(store, lease=LEASE)
        q.enqueue(mention(1, 1), now=T0)
        with caplog.at_level(logging.ERROR, logger="service.budget"):
            assert q.claim(now=T0, owner="w", admit=gov.admit) is not None
            snap = gov.snapshot(T0)
        assert snap.windows[0].limit == 30_000
        assert snap.policy.error is not None and snap.policy.overrides_local is False
        assert sum("cannot be read" in r.getMessage() for r in caplog.records) == 1


def test_parse_policy_takes_exactly_the_shared_fields() -> None:
    good = dict.fromkeys(SHARED_FIELDS, 3)
    good["enabled"] = False
    assert parse_policy(json.dumps(good)) == good
    with pytest.raises(ValueError, match="exactly the fields"):
        parse_policy(json.dumps({**good, "per_actor_pct": 50}))
