"""The poller and the delivery log at an organisation's scale: counted requests, cycle
time, and how long a trigger waits to be found.

    python -m tests.bench.bench_org_scale [--repos 10 1000 10000] [--hours 2]

For each size: one installation with that many repositories (a pull request each), in
the GitHub simulator in process, with GitHub's limits (an installation's grows with its
repositories to 12,500 an hour; search has its own 30 a minute), the real client, the
real poller and a SQLite store. The store starts as a poller that has been running
leaves it: every stream's watermark set, each repository's last poll spread over the
sweep before (so what is measured is the steady state, not the one-time seeding).
With ``--first-sweep``, each size above 10 is also run from an empty store: the poller's
first day at that size, when most repositories are not seeded yet and a change in one is
decided at its first poll (``CyclePlanner``'s seed floor).

Then ``--hours`` of simulated time with **webhooks disabled** — the poller alone — and
ten pull-request events a minute spread across the repositories (half a pull request
opened, half an ``@claude review`` on an existing one), a cycle every 5 minutes:

- counted requests an hour against the installation's limit (a 304 and a search do not
  count), and their share of it;
- the wall time of a cycle (median, max);
- (c) the latency from an event to its queue row (median, max).

And the delivery log: (a) one webhook lost in transit and (b) a 30-minute outage of the
App (300 deliveries failed), each caught by one read of the log (``HookLogReader``)
with GitHub sending what it is asked for again; the requests that read costs (as the
App, JWT: not the installation's limit) and the latency, which is at most the reader's
interval (60 s) plus the read.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import anyio
import httpx

from service.intake.poller.schedule import sweep_interval
from service.intake.recovery.reader import HookLogReader
from service.intake.webhook.deliveries import DeliveryLog
from service.intake.webhook.delivery import Received
from service.storage import repository_polls
from service.storage.times import to_db_time
from tests.poller_rig import T0, PollerRig, sha
from tests.simulator.harness import APP_ID
from tests.simulator.webhooks import WebhookSender

CYCLE = timedelta(minutes=5)
EVENTS_PER_MINUTE = 10


@dataclass
class Result:
    repos: int
    limit: int
    sweep: timedelta
    counted_per_hour: float
    cycle_median: float
    cycle_max: float
    latency_median: float
    latency_max: float
    found: int
    events: int


def _prime(rig: PollerRig, names: list[str], sweep: timedelta) -> None:
    """The store as a running poller leaves it: marks set, last polls spread."""
    mark = to_db_time(T0 - timedelta(hours=1))
    with rig.store.transaction() as tx:
        for name in names:
            for stream in ("pull_requests", "comments"):
                tx.execute("INSERT INTO watermarks (name, at) VALUES (?, ?)",
                           (f"{stream}:{name}", mark))
    step = sweep / max(1, len(names))
    with rig.store.transaction() as tx:
        for i, name in enumerate(names):
            repository_polls.record(tx, [(name, None)], T0 - sweep + step * i)


def _counted(rig: PollerRig, start: int) -> int:
    return sum(1 for r in list(rig.world.requests)[start:]
               if r.status == 200 and r.credential is not None
               and not r.path.startswith(("/app", "/search")))


async def poll_only(repos: int, hours: float, seed: int, *, primed: bool = True) -> Result:
    names = [f"acme/repo-{i:05d}" for i in range(repos)]
    with tempfile.TemporaryDirectory() as tmp:
        rig = PollerRig.create(Path(tmp), repos=names)
        try:
            world = rig.world
            for name in names:
                world.add_pull(name, number=1, title="Old", user="alice", head_sha=sha(1),
                               base_sha="a" * 40, diff="", created_at=T0 - timedelta(days=2),
                               updated_at=T0 - timedelta(days=2))
            limit = world.limiter.limit_of(f"installation:{rig.installation.id}")
            sweep = sweep_interval(repos, limit, CYCLE)
            if primed:
                _prime(rig, names, sweep)
            await rig.poll()  # lists the installation, mints a token
            rng = random.Random(seed)
            expected: dict[str, object] = {}
            numbers: dict[str, int] = {}
            start = len(world.requests)
            walls: list[float] = []
            minutes = int(hours * 60)
            for minute in range(1, minutes + 1):
                rig.tick(60)
                for _ in range(EVENTS_PER_MINUTE):
                    repo = rng.choice(names)
                    if rng.random() < 0.5:
                        number = numbers[repo] = numbers.get(repo, 1) + 1
                        world.add_pull(repo, number=number, title="New", user="alice",
                                       head_sha=sha(number), base_sha="a" * 40, diff="")
                        expected[f"pr_opened:{repo}:{number}:{sha(number)}"] = rig.now()
                    else:
                        comment = world.add_issue_comment(repo, 1, user="bob",
                                                          body="@claude review")
                        expected[f"mention:{repo}:1:{comment.id}"] = rig.now()
                if minute % 5 == 0:
                    began = time.perf_counter()
                    report = await rig.poll()
                    walls.append(time.perf_counter() - began)
                    if report.failures:
                        raise RuntimeError(f"cycle failed: {report.failures}")
            rig.tick(CYCLE.total_seconds())
            await rig.poll()  # the last events' cycle
            counted = _counted(rig, start)
            rows = {r.dedupe_key: r.enqueued_at for r in rig.queue.rows()}
            waits = [(rows[k] - at).total_seconds() for k, at in expected.items()
                     if k in rows]  # type: ignore[operator]
            return Result(repos, limit, sweep, counted / (hours + CYCLE / timedelta(hours=1)),
                          statistics.median(walls), max(walls),
                          statistics.median(waits), max(waits), len(waits), len(expected))
        finally:
            await rig.close()


async def delivery_log(lost: int) -> tuple[int, int, float]:
    """``lost`` deliveries failed while the App was down, then one read of the log:
    the JWT requests it cost, the rows enqueued, and its wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        rig = PollerRig.create(Path(tmp), repos=["acme/widgets"])
        try:
            deliveries = DeliveryLog(rig.store, lambda: rig.ctx)

            def app(request: httpx.Request) -> httpx.Response:
                received = Received(request.headers["x-github-delivery"],
                                    request.headers["x-github-event"], request.content,
                                    "application/json", rig.now())
                (result,) = deliveries.receive_batch([received])
                return httpx.Response(getattr(result, "status", 500))

            sender = WebhookSender(httpx.AsyncClient(transport=httpx.MockTransport(app),
                                                     base_url="http://app"),
                                   url="/hook", secret=None, app_id=APP_ID,
                                   log=rig.world.hook_log)
            for n in range(1, lost + 1):
                rig.open_pull(n, emit=False)
                sender.lose(sender.build("pull_request", rig.world.payloads.pull_request(
                    "opened", rig.world.pull("acme/widgets", n))))

            async def ingest(batch):  # type: ignore[no-untyped-def]
                return await anyio.to_thread.run_sync(deliveries.receive_batch, batch)

            reader = HookLogReader(client=rig.client, store=rig.store, ingest=ingest,
                                   clock=rig.now)
            start = len(rig.world.requests)
            began = time.perf_counter()
            await reader.read_once(rig.now())
            await sender.deliver_pending(rig.world)
            wall = time.perf_counter() - began
            requests = len(rig.world.requests) - start
            return requests, len(rig.queue.rows()), wall
        finally:
            await rig.close()


async def main(sizes: list[int], hours: float, first_sweep: bool) -> None:
    print(f"poller alone (webhooks disabled), {EVENTS_PER_MINUTE} events a minute, "
          f"{hours:g} h simulated, a cycle every {CYCLE.total_seconds() / 60:g} min")
    print("| repositories | limit/h | sweep | counted/h | share | cycle median | cycle max "
          "| (c) median | (c) max | found |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    runs = [(repos, True) for repos in sizes] + [(repos, False) for repos in sizes
                                                   if first_sweep and repos > 10]
    for repos, primed in runs:
        r = await poll_only(repos, hours, seed=repos, primed=primed)
        start = "running" if primed else "first sweep"
        print(f"| {r.repos:,} ({start}) | {r.limit:,} "
              f"| {r.sweep.total_seconds() / 3600:.1f} h "
              f"| {r.counted_per_hour:,.0f} | {r.counted_per_hour / r.limit:.1%} "
              f"| {r.cycle_median:.2f} s | {r.cycle_max:.2f} s "
              f"| {r.latency_median:.0f} s | {r.latency_max:.0f} s "
              f"| {r.found}/{r.events} |")
    print()
    print("delivery log: one read after deliveries failed (requests as the App, JWT)")
    print("| lost | requests | enqueued | wall |")
    print("|---:|---:|---:|---:|")
    for lost in (1, 300):
        requests, enqueued, wall = await delivery_log(lost)
        print(f"| {lost} | {requests} | {enqueued} | {wall:.2f} s |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repos", type=int, nargs="+", default=[10, 1000, 10000])
    parser.add_argument("--hours", type=float, default=2.0)
    parser.add_argument("--first-sweep", action="store_true",
                        help="also start each size above 10 with an empty store")
    args = parser.parse_args()
    asyncio.run(main(args.repos, args.hours, args.first_sweep))
