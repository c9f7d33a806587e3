"""The larger chaos run: more triggers, more SIGKILLs, the same loss accounting.

    python -m tests.bench.bench_chaos [--triggers 200] [--seconds 90] [--seed N]

What ``tests/chaos/test_chaos.py`` runs in about a minute (see ``tests/chaos/driver.py``
for the schedule and ``tests/chaos/accounting.py`` for the classes and checks), scaled up:
``--triggers`` triggers created over the first two thirds of ``--seconds``, ``serve``
SIGKILLed every 2-6 s and restarted after up to a second until ``--seconds``, the budget
tight (a session window of ``--tight`` tokens) until a kill past the middle, then raised.
Prints the classification and the invariants; the last line is the figures as JSON.
Exit 1 when anything was lost, posted twice, undercharged, or a window breached.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.chaos.driver import ChaosSettings, describe, run_chaos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--triggers", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=90.0, help="how long kills go on")
    parser.add_argument("--tight", type=int, default=800_000,
                        help="the session window, in tokens, until the budget is raised")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--keep", type=Path, help="run here and keep the files")
    args = parser.parse_args(argv)
    settings = ChaosSettings(
        triggers=args.triggers, inject_seconds=args.seconds * 2 / 3,
        chaos_seconds=args.seconds, kill_gap=(2.0, 6.0), switch_at=args.seconds / 2,
        tight_session_tokens=args.tight, drain_timeout=600.0, seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="bench-chaos-") as tmp:
        root = args.keep or Path(tmp) / "chaos"
        result = run_chaos(root, settings, progress=lambda line: print(line, flush=True))
    print(describe(result))
    report = result.report
    print(json.dumps({
        "seed": result.seed, "triggers": len(report.verdicts), "kills": result.kills,
        "classes": report.counts, "posted_twice": len(report.posted_twice),
        "notices_twice": len(report.notices_twice), "undercharged": len(report.undercharged),
        "window_breaches": len(report.window_breaches),
        "engine_runs": sum(v.engine_runs for v in report.verdicts),
        "ledger_rows": report.ledger_rows, "published_after_lease":
            result.published_after_lease, "refusals": result.refusals,
        "notices": result.notices, "peak_before_switch": result.peak_before_switch,
        "tight_limit": result.tight_limit, "drained_seconds": round(result.drained_in, 1),
        "total_seconds": round(result.total_seconds, 1), "webhooks": result.deliveries,
        "found_by": {k: sum(1 for v in report.verdicts if v.found_by == k)
                     for k in ("webhook", "poller")}}))
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
