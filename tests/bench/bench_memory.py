"""Resident memory of ``serve --role all``: idle, and busy.

    python -m tests.bench.bench_memory [--triggers 160] [--idle-seconds 20]

The real process, as ``tests/chaos`` runs it: ``python -m service serve --role all``
against the standalone simulator (``python -m tests.simulator --activity``, eight repositories
in eight installations) and the fake ``claude`` (0.2-1.0 s a run; its processes are
children of ``serve`` but have their own memory, not counted here). Memory is read from
``/proc/PID/status``: ``VmRSS`` (resident now) and ``VmHWM`` (the peak so far).

1. **idle**: started, every repository seeded, then ``--idle-seconds`` of poll cycles
   (every 5 s) with nothing to do: VmRSS at the end, and VmHWM (start-up included);
2. **busy**: ``--triggers`` webhooks (half opened pull requests, half ``@claude review``)
   sent as fast as the receiver takes them, reviewed and published by the default two
   workers while VmRSS is sampled every 0.2 s: the peak sample, VmHWM at the end, and
   VmRSS once the queue is empty again.

The last line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.chaos.rig import ChaosRig, RigSettings


def status_kib(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (KiB) of ``pid``."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def mib(kib: int) -> float:
    return round(kib / 1024, 1)


def run(root: Path, triggers: int, idle_seconds: float) -> dict[str, Any]:
    repos = 8
    opened = triggers // 2
    mentions = triggers - opened
    rig = ChaosRig(root, RigSettings(
        repos=repos, existing_pulls=-(-mentions // repos), new_pulls=-(-opened // repos),
        engine_seconds=(0.2, 1.0), workers=2, lease_seconds=300, wall_clock_seconds=60,
        poll_interval=5))
    try:
        rig.lay_out()
        rig.start_simulator()
        serve = rig.start_serve()
        pid = serve.process.pid
        rig.wait_seeded()
        time.sleep(idle_seconds)
        idle = status_kib(pid)

        started = time.monotonic()
        samples = []
        for i in range(triggers):
            repo = rig.repos[(i // 2) % repos]  # each kind round-robin over repositories
            if i % 2 == 0:
                rig.open_pull(repo, emit=True)
            else:
                pull = rig.existing[repo][(i // 2) // repos]
                rig.comment(repo, pull.number, "@claude review", emit=True)
            rig.deliver(rig.take_events())
            samples.append(status_kib(pid)["VmRSS"])
        while True:
            rig.deliver(rig.take_events())
            samples.append(status_kib(pid)["VmRSS"])
            busy = rig.rows("SELECT count(*) AS n FROM queue WHERE status IN "
                            "('pending', 'claimed')")[0]["n"]
            unpublished = rig.rows("SELECT count(*) AS n FROM runs WHERE publish_outcome "
                                   "IS NULL AND publish_failed_at IS NULL")[0]["n"]
            done = rig.rows("SELECT count(*) AS n FROM queue")[0]["n"]
            if done >= triggers and busy == 0 and unpublished == 0:
                break
            if time.monotonic() - started > 900:
                raise TimeoutError("the load did not drain in 15 minutes")
            time.sleep(0.2)
        drained = time.monotonic() - started
        after = status_kib(pid)
        reviews = len(rig.rows("SELECT * FROM runs WHERE publish_outcome = 'published'"))
        return {
            "idle_rss_mib": mib(idle["VmRSS"]), "idle_hwm_mib": mib(idle["VmHWM"]),
            "busy_peak_rss_mib": mib(max(samples)), "busy_hwm_mib": mib(after["VmHWM"]),
            "after_rss_mib": mib(after["VmRSS"]), "triggers": triggers,
            "reviews_published": reviews, "drained_seconds": round(drained, 1),
        }
    finally:
        rig.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", type=int, default=160)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        result = run(Path(tmp), args.triggers, args.idle_seconds)
    print(f"idle:  VmRSS {result['idle_rss_mib']} MiB (VmHWM {result['idle_hwm_mib']} MiB)")
    print(f"busy:  VmRSS peak {result['busy_peak_rss_mib']} MiB, VmHWM "
          f"{result['busy_hwm_mib']} MiB; {result['reviews_published']} reviews in "
          f"{result['drained_seconds']} s")
    print(f"after: VmRSS {result['after_rss_mib']} MiB")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
