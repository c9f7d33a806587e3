"""One chaos run: triggers, SIGKILLs and restarts on a schedule, then a drain and the
accounting (``accounting.classify``).

The run, in order:

1. lay out the rig with a *tight* budget, start the simulator and ``serve``, wait until
   the poller has seeded every repository. The tight session window is a quarter of the
   least the triggers can spend (each engine run costs at least the plan's minimum, a
   killed one its whole reservation), so it must refuse a claim before they are all
   served, whatever the durations and the kills (``tight_session``);
2. for ``chaos_seconds``: create the triggers at random moments (opened pull requests
   and ``@claude review|describe`` comments; about half with a webhook, the rest
   poll-only), deliver every webhook GitHub emits (the App's own events too) while
   ``serve`` is up — a delivery that meets a dead process is lost, as on GitHub — and
   SIGKILL ``serve`` at random moments, restarting it after a random pause. At the first
   kill after ``switch_at`` *once a refusal has been logged* the budget is raised
   (``pr-review-agent budget --publish-policy`` with a bigger session window, the
   process down): the windows have bound before it — by construction, not by luck: the
   driver waits for the refusal the tight window must produce —, so the sliding check
   has something to check, and everything can still finish after it;
3. heal: one last start, no more kills, until nothing is queued, claimed or waiting to
   be published (or ``drain_timeout``);
4. stop ``serve`` with SIGTERM (it must exit 0), then publish whatever is still
   unposted, as the next start would (``publish_after_lease``: nothing, when the drain
   finished — a killed attempt's 30-second lease lapses and the live process posts it);
5. read the store, the simulator's posts and the engine's usage log, and classify.
"""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from service.budget.governor import Governor
from service.config.strict_yaml import load_config
from service.github.client import GitHubClient
from service.publish.checks.loop import CheckRuns
from service.publish.github import GitHubPublisher
from service.publish.retry import republish_pending
from service.review.installations import Installations
from service.storage.open import open_store
from service.storage.times import from_db_time
from tests.chaos.accounting import Limits, Report, Trigger, charge, classify
from tests.chaos.rig import ROOT, SLUG, ChaosRig, RigSettings
from tests.kit.queue import QueueDriver

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ChaosSettings:
    triggers: int = 50
    #: Triggers are created over this many seconds from the start.
    inject_seconds: float = 20.0
    #: Kills happen until this many seconds from the start.
    chaos_seconds: float = 26.0
    #: Seconds between one restart and the next kill, and how long ``serve`` stays down.
    kill_gap: tuple[float, float] = (1.5, 5.0)
    down_for: tuple[float, float] = (0.0, 1.0)
    #: The budget is raised at the first kill after this many seconds.
    switch_at: float = 16.0
    #: None: ``tight_session`` (a window that must refuse before the triggers are served).
    tight_session_tokens: int | None = None
    big_session_tokens: int = 5_000_000
    #: How long the driver waits, past the chaos, for the refusal the tight window owes.
    refusal_timeout: float = 60.0
    drain_timeout: float = 120.0
    opened_share: float = 0.4
    describe_share: float = 0.2
    webhook_share: float = 0.5
    seed: int | None = None
    rig: RigSettings = field(default_factory=RigSettings)
    #: Seconds from the start at which ``restart_database`` is called: the database
    #: server restarted (or failed over) under the running hosts.
    database_restarts: tuple[float, ...] = ()
    restart_database: Callable[[], None] | None = None


@dataclass
class ChaosResult:
    report: Report
    kills: int
    incarnations: int
    switch_at: datetime | None
    drained_in: float
    total_seconds: float
    published_after_lease: int
    final_exit: int | None
    deliveries: dict[str, int]
    seed: int
    rig: ChaosRig
    #: Budget refusals logged, notices posted, and the session charge reached before the
    #: budget was raised against the tight limit (the windows did bind).
    refusals: int = 0
    notices: int = 0
    peak_before_switch: int = 0
    tight_limit: int = 0
    #: Hosts whose ``serve`` logged "poller leads", and how many of those lines were a
    #: standby taking over (the leader's host killed).
    poller_leaders: frozenset[int] = frozenset()
    poller_takeovers: int = 0
    #: Database restarts made, and every ``serve`` that exited without being killed:
    #: (host, exit code).
    database_restarts: int = 0
    crashes: list[tuple[int, int | None]] = field(default_factory=list)


def plan(settings: ChaosSettings, rng: random.Random, repos: list[str]
         ) -> list[tuple[float, str, str, str, str]]:
    """(at, repo, kind, command, via) for every trigger, in time order.

    The shares are exact counts, shuffled, so both paths are always taken; the first
    trigger comes with a webhook at once, before the first kill can fall, so the webhook
    path is seen to find work whatever the kills do.
    """
    n = settings.triggers
    opened = round(n * settings.opened_share)
    kinds = ["pr_opened"] * opened + ["mention"] * (n - opened)
    rng.shuffle(kinds)
    hooked = max(1, min(n - 1, round(n * settings.webhook_share)))
    vias = ["webhook"] * hooked + ["poll"] * (n - hooked)
    rng.shuffle(vias)
    vias.remove("webhook")
    vias.insert(0, "webhook")
    items = []
    seen = dict.fromkeys(("pr_opened", "mention"), 0)
    for index, (kind, via) in enumerate(zip(kinds, vias, strict=True)):
        command = "describe" if kind == "mention" and rng.random() < settings.describe_share \
            else "review"
        repo = repos[seen[kind] % len(repos)]  # each kind spread evenly over repositories
        seen[kind] += 1
        at = 0.0 if index == 0 else rng.uniform(0, settings.inject_seconds)
        items.append((at, repo, kind, command, via))
    return sorted(items)


def tight_session(settings: ChaosSettings) -> int:
    """A session window the triggers must overflow: a quarter of the least they spend.

    Every trigger that runs the engine spends at least ``engine_tokens[0]`` (a killed run
    is charged its whole reservation, more). Admission needs the window to hold one more
    ``max_run_tokens`` reservation, so the window admits at most a quarter of the runs'
    least total before refusing — and stays above one reservation, so it admits at all.
    """
    rig = settings.rig
    least = settings.triggers * rig.engine_tokens[0]
    return max(rig.max_run_tokens + rig.engine_tokens[1], least // 4)


def rig_settings(settings: ChaosSettings) -> RigSettings:
    """Enough pull requests per repository for the planned triggers (one trigger each)."""
    repos = settings.rig.repos
    opened = round(settings.triggers * settings.opened_share)
    mentions = settings.triggers - opened
    return RigSettings(**{**settings.rig.__dict__,
                          "existing_pulls": -(-mentions // repos) + 1,
                          "new_pulls": -(-opened // repos) + 1,
                          "session_tokens": settings.tight_session_tokens
                          or tight_session(settings)})


def run_chaos(root: Path, settings: ChaosSettings,
              progress: Callable[[str], None] = lambda _: None) -> ChaosResult:
    seed = settings.seed if settings.seed is not None else random.SystemRandom().randrange(
        2**32)
    rng = random.Random(seed)
    rig = ChaosRig(root, rig_settings(settings))
    started = time.monotonic()
    try:
        return _run(rig, settings, rng, seed, started, progress)
    finally:
        rig.close()


def _run(rig: ChaosRig, settings: ChaosSettings, rng: random.Random, seed: int,
         started: float, progress: Callable[[str], None]) -> ChaosResult:
    rig.lay_out()
    rig.start_simulator()
    big = rig.config_for("config-big.yaml", session_tokens=settings.big_session_tokens)
    tight = rig.settings
    limits = [Limits(EPOCH, tight.session_tokens, tight.weekly_tokens // 7,
                     tight.weekly_tokens)]
    hosts = list(range(tight.hosts))
    for host in hosts:
        rig.start_serve(host=host)
    rig.wait_seeded()  # triggers made before a repository's cold start are its backlog
    progress(f"seed {seed}: serve up, repositories seeded")

    schedule = plan(settings, rng, rig.repos)
    mentioned: dict[str, int] = dict.fromkeys(rig.repos, 0)
    triggers: list[Trigger] = []
    by_event: dict[str, tuple[str, int | None]] = {}
    statuses: list[int | None] = []
    kills = 0
    switched: datetime | None = None
    config = rig.root / "config.yaml"
    t0 = time.monotonic()
    next_kill: float | None = t0 + rng.uniform(*settings.kill_gap)
    restart_at: float | None = None
    down: int | None = None  # the host killed and not yet restarted (one at a time)
    restarts = list(settings.database_restarts)
    crashes: list[tuple[int, int | None]] = []

    def revive_crashed() -> None:
        """A ``serve`` that exited by itself is a failure of the run: recorded, restarted."""
        for host in hosts:
            if host != down and not rig.alive(host):
                crashes.append((host, rig.serves[host].process.returncode))
                rig.start_serve(config, wait=False, host=host)

    def raise_budget() -> datetime:
        """Publish the big policy (with the killed host down; on two hosts the other runs
        on): every row reserved before the returned instant was admitted under the tight
        one. That holds because a claim is stamped inside its transaction (the workers
        pass ``QueueDriver.claim`` the clock), never before a wait for its connection."""
        at = datetime.now(UTC)
        publish_policy(big)
        limits.append(Limits(at, settings.big_session_tokens, tight.weekly_tokens // 7,
                             tight.weekly_tokens))
        return at

    def refused() -> bool:
        return any(str(line.get("message", "")).startswith("budget refused a claim")
                   for line in rig.serve_log_lines())

    def deliver() -> None:
        events = rig.take_events()
        if not events:
            return
        # Any replica may receive any delivery: each goes to a host at random (a dead one
        # refuses the connection, as on GitHub, and the poller must find the trigger).
        answers = rig.deliver(events, [rng.choice(hosts) for _ in events])
        statuses.extend(answers)
        for event, status in zip(events, answers, strict=True):
            ident = event_identity(event)
            if ident is not None:
                by_event[ident] = (event["delivery_id"], status)

    while schedule or time.monotonic() - t0 < settings.chaos_seconds:
        now = time.monotonic()
        while schedule and schedule[0][0] <= now - t0:
            _, repo, kind, command, via = schedule.pop(0)
            triggers.append(create(rig, repo, kind, command, via, mentioned))
        if restarts and now - t0 >= restarts[0] and settings.restart_database is not None:
            restarts.pop(0)
            settings.restart_database()
            progress(f"database restarted at {now - t0:.1f} s")
        revive_crashed()
        if next_kill is not None and now >= next_kill and all(rig.alive(h) for h in hosts):
            # The first kill takes the poller's leader (so a standby is seen to take over),
            # later ones either host at random.
            down = (poller_leader(rig) if kills == 0 and len(hosts) > 1 else None)
            down = rng.choice(hosts) if down is None else down
            rig.kill_serve(host=down)
            kills += 1
            if switched is None and now - t0 >= settings.switch_at and refused():
                switched, config = raise_budget(), big
                progress(f"kill {kills} at {now - t0:.1f} s; budget raised")
            restart_at = now + rng.uniform(*settings.down_for)
            next_kill = None
        if restart_at is not None and now >= restart_at and down is not None:
            rig.start_serve(config, wait=False, host=down)
            restart_at, down = None, None
            if now - t0 < settings.chaos_seconds:
                next_kill = now + rng.uniform(*settings.kill_gap)
        deliver()
        time.sleep(0.05)

    if switched is None:  # no kill came late enough, or the window had not refused yet
        wait_until = time.monotonic() + settings.refusal_timeout
        while not refused() and time.monotonic() < wait_until:
            for host in hosts:
                if not rig.alive(host):
                    rig.start_serve(config, wait=False, host=host)
            deliver()
            time.sleep(0.2)
        progress("budget raised after the chaos" + ("" if refused() else
                                                     " (the tight window never refused)"))
        rig.kill_serve(host=0)
        kills += 1
        switched, config = raise_budget(), big
    for host in hosts:
        if not rig.alive(host):
            rig.start_serve(config, wait=False, host=host)
        rig.wait_ready(rig.serves[host])
    down = None  # every host is up: from here any exit is a crash
    progress(f"chaos over after {kills} kills; draining")
    drain_start = time.monotonic()
    keyed = [t.key for t in triggers]
    deadline = drain_start + settings.drain_timeout
    while time.monotonic() < deadline:
        deliver()
        revive_crashed()
        if quiescent(rig, keyed):
            break
        time.sleep(0.2)
    drained_in = time.monotonic() - drain_start
    deliver()
    exits = [rig.kill_serve(signal.SIGTERM, host=host) for host in hosts]
    final_exit = next((code for code in exits if code != 0), 0)
    later = asyncio.run(publish_after_lease(rig, config))
    triggers = [with_delivery(t, by_event) for t in triggers]
    report = classify(
        triggers,
        queue=rig.rows("SELECT * FROM queue"), ledger=rig.rows("SELECT * FROM ledger"),
        runs=rig.rows("SELECT * FROM runs"), notices=rig.rows("SELECT * FROM notices"),
        deliveries=rig.rows("SELECT * FROM deliveries"), posts=rig.posts(),
        engine_runs=rig.engine_runs(), limits=limits)
    delivered = {
        "accepted": sum(1 for s in statuses if s is not None and s < 300),
        "refused_connection": sum(1 for s in statuses if s is None),
        "error_status": sum(1 for s in statuses if s is not None and s >= 300)}
    before = [r for r in rig.rows("SELECT * FROM ledger") if from_db_time(r["reserved_at"])
              < switched]
    return ChaosResult(report=report, kills=kills, incarnations=len(rig.incarnations),
                       switch_at=switched, drained_in=drained_in,
                       total_seconds=time.monotonic() - started,
                       published_after_lease=later, final_exit=final_exit,
                       deliveries=delivered, seed=seed, rig=rig,
                       refusals=sum(1 for line in rig.serve_log_lines()
                                    if str(line.get("message", "")).startswith(
                                        "budget refused a claim")),
                       notices=len(rig.rows("SELECT * FROM notices WHERE comment_id IS NOT "
                                            "NULL")),
                       peak_before_switch=sum(charge(r) for r in before),
                       tight_limit=tight.session_tokens,
                       poller_leaders=frozenset(
                           line["_host"] for line in rig.serve_log_lines()
                           if line.get("message") == "poller leads"),
                       database_restarts=len(settings.database_restarts) - len(restarts),
                       crashes=crashes,
                       poller_takeovers=sum(1 for line in rig.serve_log_lines()
                                            if line.get("message") == "poller leads"
                                            and line.get("takeover")))


def poller_leader(rig: ChaosRig) -> int | None:
    """The host whose live ``serve`` last logged that it leads the poller, if any."""
    leader = None
    for line in rig.serve_log_lines():
        if line.get("message") == "poller leads" and rig.alive(line["_host"]) and \
                rig.serves[line["_host"]].index == line["_incarnation"]:
            leader = line["_host"]
    return leader


def create(rig: ChaosRig, repo: str, kind: str, command: str, via: str,
           mentioned: dict[str, int]) -> Trigger:
    """Make one trigger happen on GitHub; its webhook (if any) is delivered later."""
    emit = via == "webhook"
    if kind == "pr_opened":
        branch = rig.open_pull(repo, emit=emit)
        return Trigger(ident=f"{repo}#{branch.number}", kind=kind, command="review", via=via,
                       repo=repo, number=branch.number,
                       key=f"pr_opened:{repo}:{branch.number}:{branch.head_sha}")
    mentioned[repo] += 1
    number = rig.existing[repo][mentioned[repo] - 1].number
    comment_id = rig.comment(repo, number, f"@claude {command}", emit=emit)
    return Trigger(ident=f"{repo}#{number}", kind=kind, command=command, via=via, repo=repo,
                   number=number, key=f"mention:{repo}:{number}:{comment_id}")


def event_identity(event: dict[str, Any]) -> str | None:
    """What a delivered event was about, in the terms ``trigger_identity`` uses."""
    payload = event["payload"]
    repo = payload.get("repository", {}).get("full_name")
    if event["event"] == "pull_request" and event["action"] == "opened":
        return f"pull {repo}#{payload['pull_request']['number']}"
    if event["event"] == "issue_comment" and event["action"] == "created":
        return f"comment {payload['comment']['id']}"
    return None


def trigger_identity(trigger: Trigger) -> str:
    if trigger.kind == "pr_opened":
        return f"pull {trigger.repo}#{trigger.number}"
    return f"comment {trigger.key.rsplit(':', 1)[1]}"


def with_delivery(trigger: Trigger, by_event: dict[str, tuple[str, int | None]]) -> Trigger:
    """The trigger with its webhook's delivery id and HTTP status (None: not delivered)."""
    found = by_event.get(trigger_identity(trigger))
    if found is None:
        return trigger
    return replace(trigger, delivery_id=found[0], delivered=found[1])


def publish_policy(config: Path) -> None:
    """``pr-review-agent budget --config FILE --publish-policy``, as an operator runs it."""
    subprocess.run([sys.executable, "-m", "service", "budget", "--config", str(config),
                    "--publish-policy"], cwd=ROOT, check=True, capture_output=True,
                   timeout=60)


def quiescent(rig: ChaosRig, keys: list[str]) -> bool:
    """Nothing of ``keys`` queued or claimed, and no run waiting to be published: a run a
    killed incarnation left under its (30-second, renewed) publication lease is posted by
    the live one's maintenance round once that lease lapses, so the drain waits for it."""
    queue = {r["dedupe_key"]: r["status"] for r in rig.rows("SELECT dedupe_key, status "
                                                             "FROM queue")}
    if any(queue.get(key) in (None, "pending", "claimed") for key in keys):
        return False
    if rig.rows("SELECT 1 FROM checks WHERE version > shown_version OR status != 'completed'"):
        return False  # a check run GitHub has not been told the ending of
    return not rig.rows("SELECT 1 FROM runs WHERE publish_outcome IS NULL "
                        "AND publish_failed_at IS NULL AND content_purged_at IS NULL")


async def publish_after_lease(rig: ChaosRig, config_path: Path) -> int:
    """Publish runs a killed attempt left under its publication lease, as the maintenance
    loop of a ``serve`` started 16 minutes later would (``republish_pending``)."""
    config = load_config(str(config_path), {})
    store = open_store(config.store)

    def later() -> datetime:
        return datetime.now(UTC) + timedelta(minutes=16)

    total = 0
    try:
        async with GitHubClient.from_config(config.github, clock=lambda: datetime.now(UTC)
                                            ) as github:
            publisher = GitHubPublisher(
                store=store, github=github, installations=Installations(store, github),
                clock=later, config=lambda: config.publish, mention=config.triggers.mention,
                bot_login=lambda: f"{SLUG}[bot]")
            for _ in range(10):  # each call offers up to 20; a failed attempt is offered again
                count = await republish_pending(store, publisher, later())
                if not count:
                    break
                total += count
            # ... and its check-run loop tells GitHub how those runs ended.
            governor = Governor(store, config.budget, publish=False)
            check_runs = CheckRuns(
                store=store, github=github, installations=Installations(store, github),
                governor=governor, config=lambda: config.checks,
                publish=lambda: config.publish, clock=later,
                max_attempts=QueueDriver(store).max_attempts)
            for _ in range(10):
                if not await check_runs.sync(later()):
                    break
    finally:
        store.close()
    return total


def describe(result: ChaosResult) -> str:
    return "\n".join([
        f"seed {result.seed}: {result.kills} SIGKILLs, {result.incarnations} incarnations, "
        f"drained in {result.drained_in:.1f} s, {result.total_seconds:.1f} s in all; final "
        f"SIGTERM exit {result.final_exit}; published after the lease: "
        f"{result.published_after_lease}; webhooks {result.deliveries}; poller led on "
        f"hosts {sorted(result.poller_leaders)}, {result.poller_takeovers} takeover(s); "
        f"{result.database_restarts} database restart(s); crashed: {result.crashes}",
        f"budget: {result.refusals} refusals logged, {result.notices} notices posted; "
        f"charged {result.peak_before_switch} of the tight session limit "
        f"{result.tight_limit} before it was raised",
        result.report.summary()])
