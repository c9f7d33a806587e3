"""Requests the poller spends per cycle, and how many of them are free 304s.

    python -m tests.bench.bench_poller [--repos 1 10 100] [--busy-share 0.1]

For each size, one installation with that many repositories (two pull requests and a
comment each) is polled through the real client and the GitHub simulator (in process,
SQLite store on disk). Five cycles, on the simulator's clock:

- ``cold``: the first cycle (installation refresh, token mint, seeding every stream);
- ``idle``: nothing changed on GitHub;
- ``busy``: a share of the repositories got a new pull request and a mention;
- ``rotated``: an hour later, so the installation token was replaced and every stored
  ETag belongs to the old token;
- ``idle``: the cycle after that.

Per cycle: every request GitHub saw, the listing requests (``/repos/...``), how many
answered 304, what counted against the installation's primary limit (a 304 does not),
token mints, rows enqueued, and the wall time of the cycle.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.poller_rig import PollerRig


@dataclass
class Row:
    repos: int
    cycle: str
    requests: int
    listings: int
    not_modified: int
    counted: int
    mints: int
    enqueued: int
    seconds: float

    @property
    def share_304(self) -> float:
        return self.not_modified / self.listings if self.listings else 0.0


async def cycle(rig: PollerRig, repos: int, name: str) -> Row:
    start = len(rig.world.requests)
    began = time.perf_counter()
    report = await rig.poll()
    seconds = time.perf_counter() - began
    if not report.success:
        raise RuntimeError(f"{name} cycle failed: {report.failures}")
    seen = list(rig.world.requests)[start:]
    listings = [r for r in seen if r.method == "GET" and r.path.startswith("/repos/")]
    installation = [r for r in seen if r.credential is not None and not r.path.startswith("/app")]
    return Row(
        repos=repos, cycle=name, requests=len(seen), listings=len(listings),
        not_modified=sum(1 for r in listings if r.status == 304),
        counted=sum(1 for r in installation if r.status != 304),
        mints=sum(1 for r in seen if r.path.endswith("/access_tokens")),
        enqueued=len(report.enqueued), seconds=seconds,
    )


async def run(repos: int, busy_share: float) -> list[Row]:
    names = [f"acme/repo-{i:03d}" for i in range(repos)]
    with tempfile.TemporaryDirectory() as tmp:
        rig = PollerRig.create(Path(tmp), repos=names)
        try:
            for index, name in enumerate(names):
                rig.open_pull(1, repo=name, emit=False)
                rig.open_pull(2, repo=name, emit=False)
                rig.comment(1, f"hello {index}", repo=name)
            rig.tick()
            rows = [await cycle(rig, repos, "cold")]
            rig.tick(300)
            rows.append(await cycle(rig, repos, "idle"))
            for name in names[: max(1, round(repos * busy_share))]:
                rig.open_pull(3, repo=name, emit=False)
                rig.comment(3, "@claude review", repo=name)
            rig.tick(300)
            rows.append(await cycle(rig, repos, "busy"))
            rig.tick(3600)
            rows.append(await cycle(rig, repos, "rotated"))
            rig.tick(300)
            rows.append(await cycle(rig, repos, "idle"))
            return rows
        finally:
            await rig.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--busy-share", type=float, default=0.1)
    args = parser.parse_args()
    print(f"{'repos':>5} {'cycle':<8} {'requests':>8} {'listings':>8} {'304s':>5} "
          f"{'304 share':>9} {'counted':>7} {'mints':>5} {'enqueued':>8} {'ms':>8}")
    for repos in args.repos:
        for row in asyncio.run(run(repos, args.busy_share)):
            print(f"{row.repos:>5} {row.cycle:<8} {row.requests:>8} {row.listings:>8} "
                  f"{row.not_modified:>5} {row.share_304:>9.0%} {row.counted:>7} "
                  f"{row.mints:>5} {row.enqueued:>8} {row.seconds * 1000:>8.1f}")


if __name__ == "__main__":
    main()
