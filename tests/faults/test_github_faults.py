"""GitHub misbehaving, through the simulator, under the whole daemon (``serve --role all``
in-process): bursts of 5xx, a secondary rate limit with ``Retry-After``, slow answers,
dropped connections (before and after GitHub did the work), a token mint that fails, and
an engine that hangs. Each repository gets one fault and one ``@claude review``; every
request ends reviewed exactly once, and the log says what happened.

All six run at once in one daemon (one module-scoped run, ~15 s): each repository is in
its own installation, so the client's per-installation write pacing does not serialise
them, and each fault matches only its repository's paths.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from service.app import runners
from service.review import job
from tests.faults.rig import FaultRig

FIVE_XX, SECONDARY, SLOW, DROPS, MINT, HANG = (f"org{i}/repo{i}" for i in range(1, 7))
WALL_CLOCK = 4
RETRY = timedelta(seconds=2)
#: One run of about 30 s that every test here reads: the module starts first, on one worker.
pytestmark = pytest.mark.slow(5)
#: Every answer GitHub gives the SLOW repository is this late (seconds).
SLOW_DELAY = 3.0


@dataclass
class Run:
    rig: FaultRig
    keys: dict[str, str]
    webhook_status: dict[str, int | None]
    webhook_seconds: dict[str, float]
    mint_failed_jobs: int = 0
    exit_code: int | None = None
    hung_pids: list[int] = field(default_factory=list)


async def scenario(tmp: Path) -> Run:
    rig = FaultRig.create(tmp, repos=6, wall_clock_seconds=WALL_CLOCK,
                          hang=[f"{HANG}#1"])
    faults = rig.world.faults
    faults.server_error(method="GET", path_glob=f"/repos/{FIVE_XX}/pulls/1", status=502,
                        times=2)
    faults.server_error(method="POST", path_glob=f"/repos/{FIVE_XX}/pulls/1/reviews",
                        status=503, times=1)
    faults.secondary_limit(method="POST", path_glob=f"/repos/{SECONDARY}/pulls/1/reviews",
                           retry_after=1, times=1)
    faults.slow(path_glob=f"/repos/{SLOW}/*", delay=SLOW_DELAY, times=None)
    faults.drop(method="GET", path_glob=f"/repos/{DROPS}/pulls/1", kind="read_error", times=1)
    faults.drop(method="POST", path_glob=f"/repos/{DROPS}/pulls/1/reviews",
                kind="remote_protocol", applied=True, times=1)
    mint = faults.fail_token_mint(installation_id=rig.installations[MINT], status=500,
                                  times=None)
    run = Run(rig=rig, keys={}, webhook_status={}, webhook_seconds={})
    async with rig.running() as task:
        for repo in rig.repos:
            run.keys[repo] = rig.mention(repo)
            before = time.monotonic()
            (run.webhook_status[repo],) = await rig.deliver()
            run.webhook_seconds[repo] = time.monotonic() - before
        # The mint fails until one attempt of the job has failed on it; then GitHub heals.
        await rig.wait_for(lambda: rig.logged("job failed", dedupe_key=run.keys[MINT]),
                           "a job to fail on the token mint")
        run.mint_failed_jobs = len(rig.logged("job failed", dedupe_key=run.keys[MINT]))
        mint.times = mint.fired

        def finished() -> bool:
            return all(rig.status(k) in ("done", "abandoned") and
                       (rig.status(k) == "abandoned" or rig.published(k))
                       for k in run.keys.values())
        await rig.wait_for(finished, "every mention to be reviewed and published")
        await rig.wait_for(lambda: rig.posts_of(run.keys[FIVE_XX]) == 1,
                           "the retried publication")
        run.hung_pids = [r["pid"] for r in rig.engine_runs() if r["trigger"] == f"{HANG}#1"]
        assert not task.done()
    run.exit_code = task.result()
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    with pytest.MonkeyPatch.context() as patch:
        # Re-offer unposted runs (and post notices) every second instead of every 10 (30).
        patch.setattr(runners, "REOFFER_INTERVAL", 1.0)
        patch.setattr(runners, "MAINTENANCE_INTERVAL", 1.0)
        # Wait 2 s, not a minute, before the attempt after a failed one.
        patch.setattr(job, "RETRY_DELAYS", (RETRY, RETRY))
        yield asyncio.run(scenario(tmp_path_factory.mktemp("github-faults")))


def test_every_mention_was_reviewed_exactly_once_and_the_daemon_stopped_cleanly(
        run: Run) -> None:
    rig = run.rig
    for repo, key in run.keys.items():
        assert rig.status(key) == "done", repo
        assert rig.posts_of(key) == 1, repo
    assert run.exit_code == 0


def test_a_burst_of_5xx_is_retried_on_reads_and_a_failed_post_is_published_later(
        run: Run) -> None:
    rig = run.rig
    retried = rig.logged("retrying after server error", url_path=f"/repos/{FIVE_XX}/pulls/1")
    assert [r.http_status for r in retried] == [502, 502]
    assert rig.logged("publication failed for now; it will be retried",
                      dedupe_key=run.keys[FIVE_XX])
    assert rig.logged("re-offered")
    [row] = rig.rows("SELECT publish_outcome, publish_attempts FROM runs WHERE dedupe_key = ?",
                     (run.keys[FIVE_XX],))
    assert row == {"publish_outcome": "published", "publish_attempts": 2}


def test_a_secondary_limit_is_waited_out_and_the_review_posted_once(run: Run) -> None:
    rig = run.rig
    [wait] = rig.logged("github rate limit: waiting",
                        url_path=f"/repos/{SECONDARY}/pulls/1/reviews")
    assert (wait.limit_kind, wait.wait_seconds) == ("secondary", 1.0)
    posts = rig.world.requests.matching("POST", f"/repos/{SECONDARY}/pulls/1/reviews")
    assert [r.status for r in posts] == [403, 200]


def test_slow_answers_do_not_hold_up_webhooks(run: Run) -> None:
    rig = run.rig
    assert run.webhook_status[SLOW] == 202
    # A receiver that waited for GitHub would take at least SLOW_DELAY; this one answers in
    # milliseconds, so the bound holds on any machine.
    assert run.webhook_seconds[SLOW] < SLOW_DELAY
    slow = [r for r in rig.world.requests if r.path.startswith(f"/repos/{SLOW}/")]
    assert slow and all(r.fault == "slow" for r in slow)
    assert rig.logged("review posted", dedupe_key=run.keys[SLOW])


def test_dropped_connections_are_retried_and_a_post_github_did_is_not_repeated(
        run: Run) -> None:
    rig = run.rig
    assert rig.logged("retrying after connection error", url_path=f"/repos/{DROPS}/pulls/1")
    assert rig.logged("publication failed for now; it will be retried",
                      dedupe_key=run.keys[DROPS])
    assert rig.logged("found the run's earlier post by its marker; recorded, not posted again",
                      dedupe_key=run.keys[DROPS])
    reviews = [r for r in rig.world.reviews.values() if r.repo_id == rig.world.repo(DROPS).id]
    assert len(reviews) == 1


def test_a_failing_token_mint_fails_the_attempt_and_a_later_one_reviews(run: Run) -> None:
    rig = run.rig
    key = run.keys[MINT]
    assert run.mint_failed_jobs >= 1
    failed_mints = rig.logged("github request failed",
                              url_path=f"/app/installations/{rig.installations[MINT]}"
                                       "/access_tokens")
    assert failed_mints and {r.http_status for r in failed_mints} == {500}
    [row] = rig.rows("SELECT attempts FROM queue WHERE dedupe_key = ?", (key,))
    assert row["attempts"] >= 2
    ledger = rig.rows("SELECT stop_reason, reserved_at, settled_at FROM ledger "
                      "WHERE dedupe_key = ? ORDER BY id", (key,))
    assert ledger[-1]["stop_reason"] == "completed"
    assert {r["stop_reason"] for r in ledger[:-1]} == {"infrastructure"}
    [released, *_] = rig.logged("released for another attempt in 2 s", dedupe_key=key)
    assert released.retry_at is not None
    # The next attempt was not claimed before the retry time.
    retry_at = datetime.fromisoformat(released.retry_at)
    assert datetime.fromisoformat(ledger[1]["reserved_at"]) >= retry_at


def test_a_hung_engine_is_killed_at_its_wall_clock_and_the_person_told(run: Run) -> None:
    rig = run.rig
    key = run.keys[HANG]
    [ledger] = rig.rows("SELECT stop_reason, used_tokens, reserved_tokens FROM ledger "
                        "WHERE dedupe_key = ?", (key,))
    assert ledger["stop_reason"] == "timeout"
    [recorded] = rig.logged("run recorded: failed (timeout)", dedupe_key=key)
    assert recorded.tokens is None or recorded.tokens <= ledger["reserved_tokens"]
    [run_row] = rig.rows("SELECT outcome, publish_outcome FROM runs WHERE dedupe_key = ?",
                         (key,))
    assert run_row == {"outcome": "failed", "publish_outcome": "refused"}
    for pid in run.hung_pids:  # the hung fake and its process group are gone
        assert not Path(f"/proc/{pid}").exists()
