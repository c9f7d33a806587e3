"""Reaction time: a webhook received → the 👀 on the comment, p50/p99.

    python -m tests.bench.bench_reaction [--steady 120] [--rate 2] [--burst 24] [--compare DIR]

The real processes, as ``tests/chaos`` runs them: ``python -m service serve --role all``
(default ``workers.count`` 2) against the standalone simulator
(``python -m tests.simulator --activity``) and the fake ``claude`` (0.2-0.5 s a run). Eight
repositories, each in an installation of its own; every trigger is an ``@claude review``
on a pull request of its own, delivered as a signed webhook over loopback.

For each trigger the clock starts just before the webhook's POST leaves this process and
stops when the simulator receives the App's ``POST …/reactions`` for that comment (both
read ``time.monotonic()``, CLOCK_MONOTONIC, one clock for every process on the host).
So the figure includes the HTTP round trip, the receiver's transaction, waking a worker,
the claim through the governor, the installation lookup and the reaction's own request.

Two phases: ``steady``, triggers at ``--rate`` per second (workers mostly free), then
``burst``, ``--burst`` triggers sent back to back (most wait for a worker to review
them; the 👀 does not, since it is sent when the work is queued,
``service/publish/acknowledge.py``). ``--compare DIR`` first runs the same phases with
``serve`` started from another checkout (``git archive COMMIT service | tar -x -C DIR``),
for a side-by-side with an older version. The last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.chaos.rig import ROOT, ChaosRig, RigSettings, signed_delivery


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def summary(name: str, latencies: list[float], answers: list[float]) -> dict[str, Any]:
    return {
        "phase": name, "triggers": len(latencies),
        "p50_ms": round(percentile(latencies, 50) * 1000, 1),
        "p90_ms": round(percentile(latencies, 90) * 1000, 1),
        "p99_ms": round(percentile(latencies, 99) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "webhook_p50_ms": round(percentile(answers, 50) * 1000, 1),
        "webhook_p99_ms": round(percentile(answers, 99) * 1000, 1),
    }


class Driver:
    def __init__(self, rig: ChaosRig) -> None:
        import httpx

        self.rig = rig
        self.http = httpx.Client(timeout=30)
        self.next_pull = dict.fromkeys(rig.repos, 0)
        self.sent: dict[str, float] = {}  # reaction path -> monotonic send time
        self.answers: dict[str, float] = {}

    def trigger(self, index: int) -> str:
        rig = self.rig
        repo = rig.repos[index % len(rig.repos)]
        pull = rig.existing[repo][self.next_pull[repo]]
        self.next_pull[repo] += 1
        comment_id = rig.comment(repo, pull.number, "@claude review", emit=True)
        [event] = [e for e in rig.take_events() if e["event"] == "issue_comment"
                   and e["payload"]["comment"]["id"] == comment_id]
        body, headers = signed_delivery(event["event"], event["payload"],
                                        event["delivery_id"])
        path = f"/repos/{repo}/issues/comments/{comment_id}/reactions"
        start = time.monotonic()
        response = self.http.post(rig.webhook_url, content=body, headers=headers)
        self.answers[path] = time.monotonic() - start
        if response.status_code != 202:
            raise RuntimeError(f"webhook answered {response.status_code}: {response.text}")
        self.sent[path] = start
        return path

    def wait(self, paths: list[str], timeout: float = 300) -> dict[str, float]:
        """Reaction arrival time per path, once every one has arrived."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = {r["path"]: r["monotonic"] for r in self.rig.chaos("GET", "reactions")
                    if r["status"] in (200, 201)}
            if all(p in seen for p in paths):
                return {p: seen[p] for p in paths}
            self.rig.take_events()  # the App's own events: not needed here
            time.sleep(0.5)
        raise TimeoutError("not every reaction arrived")

    def phase(self, name: str, count: int, rate: float | None, start_index: int
              ) -> dict[str, Any]:
        paths = []
        for i in range(count):
            paths.append(self.trigger(start_index + i))
            if rate:
                time.sleep(1 / rate)
        arrived = self.wait(paths)
        latencies = [arrived[p] - self.sent[p] for p in paths]
        return summary(name, latencies, [self.answers[p] for p in paths])


def run(root: Path, steady: int, rate: float, burst: int, service_root: Path = ROOT
        ) -> list[dict[str, Any]]:
    repos = 8
    rig = ChaosRig(root, RigSettings(repos=repos, existing_pulls=-(-(steady + burst) // repos),
                                     new_pulls=0, engine_seconds=(0.2, 0.5), workers=2,
                                     lease_seconds=120, wall_clock_seconds=30,
                                     poll_interval=60), service_root=service_root)
    try:
        rig.lay_out()
        rig.start_simulator()
        rig.start_serve()
        rig.wait_seeded()
        driver = Driver(rig)
        try:
            driver.phase("warmup", repos, 1.0, 0)  # tokens minted, installations known
            results = [driver.phase("steady", steady - repos, rate, repos)]
            time.sleep(3)  # let the steady phase's reviews finish
            results.append(driver.phase("burst", burst, None, steady))
        finally:
            driver.http.close()
        return results
    finally:
        rig.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steady", type=int, default=120, help="triggers in the steady phase")
    parser.add_argument("--rate", type=float, default=2.0, help="steady triggers per second")
    parser.add_argument("--burst", type=int, default=24, help="triggers sent back to back")
    parser.add_argument("--compare", type=Path, metavar="DIR",
                        help="also run serve from DIR (a checkout of another version, e.g. "
                             "`git archive COMMIT service | tar -x -C DIR`), first")
    args = parser.parse_args(argv)
    versions = ([("compared", args.compare)] if args.compare else []) + [("this", ROOT)]
    results = []
    for name, service_root in versions:
        with tempfile.TemporaryDirectory(prefix="bench-reaction-") as tmp:
            for r in run(Path(tmp), args.steady, args.rate, args.burst, service_root):
                results.append({"version": name, **r})
    print(f"{'version':<9} {'phase':<7} {'triggers':>8} {'p50':>9} {'p90':>9} {'p99':>9} "
          f"{'max':>9} {'webhook p50':>12} {'webhook p99':>12}")
    for r in results:
        print(f"{r['version']:<9} {r['phase']:<7} {r['triggers']:>8} {r['p50_ms']:>7.1f}ms "
              f"{r['p90_ms']:>7.1f}ms {r['p99_ms']:>7.1f}ms {r['max_ms']:>7.1f}ms "
              f"{r['webhook_p50_ms']:>10.1f}ms {r['webhook_p99_ms']:>10.1f}ms")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
