"""Sustained webhook load as an organisation produces it, with room: every delivery durable
before its answer, the answer's tail, and the 👀 on the requests among them.

    python -m tests.bench.bench_sustained [--rate 200] [--seconds 60] [--triggers 1]
                                          [--backends sqlite postgres]

The real processes, as ``tests/chaos`` runs them: ``python -m service serve --role all``
(two workers, the fake ``claude`` at 0.2-0.5 s a review) against the standalone simulator,
eight repositories each in an installation of its own. The load is open-loop: delivery
``i`` is due at ``start + i / rate`` whatever happened to the ones before it, and its
latency runs from when it was due (so a stall is charged to every delivery it delays,
not hidden). Each second ``--triggers`` of the deliveries are ``@claude review`` comments
that exist on the simulator (the 👀 is measured on them: from when the delivery was due
to when the simulator received the App's ``POST …/reactions``, both on the host's
monotonic clock); the rest are what an organisation mostly sends, comments and
pull-request events the App takes no action on, each with its own delivery id.

Afterwards the store is read: every delivery answered 2xx must have its row in
``deliveries`` (durable before its answer), and no other.

The figures are printed as a table and as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.bench.bench_reaction import percentile
from tests.chaos.rig import ChaosRig, RigSettings, signed_delivery
from tests.databases import as_url, throwaway_database


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


class Load:
    """The deliveries of one run, built before it starts (signing is not timed)."""

    def __init__(self, rig: ChaosRig, rate: int, seconds: int, triggers: int) -> None:
        self.rig = rig
        total = rate * seconds
        every = max(1, rate // max(triggers, 1)) if triggers else total + 1
        self.deliveries: list[tuple[bytes, dict[str, str], str | None]] = []
        template: dict[str, Any] | None = None
        wanted = total // every if triggers else 0
        mentions = self._mentions(wanted)
        for i in range(total):
            if triggers and i % every == every // 2 and mentions:
                event, payload, delivery_id, path = mentions.pop()
                template = template or payload
                body, headers = signed_delivery(event, payload, delivery_id)
                self.deliveries.append((body, headers, path))
                continue
            quiet = copy.deepcopy(template or self._sample())
            quiet["comment"]["id"] = 10_000_000 + i
            quiet["comment"]["body"] = f"Looks fine to me ({i})."
            body, headers = signed_delivery("issue_comment", quiet, f"bench-{i}")
            self.deliveries.append((body, headers, None))

    def _mentions(self, count: int) -> list[tuple[str, dict[str, Any], str, str]]:
        rig, found = self.rig, []
        pulls = [(repo, pull.number) for repo in rig.repos for pull in rig.existing[repo]]
        for n in range(count):
            repo, number = pulls[n % len(pulls)]
            comment_id = rig.comment(repo, number, "@claude review", emit=True)
            [event] = [e for e in rig.take_events() if e["event"] == "issue_comment"
                       and e["payload"]["comment"]["id"] == comment_id]
            found.append((event["event"], event["payload"], event["delivery_id"],
                          f"/repos/{repo}/issues/comments/{comment_id}/reactions"))
        return found[::-1]

    def _sample(self) -> dict[str, Any]:
        rig = self.rig
        repo = rig.repos[0]
        rig.comment(repo, rig.existing[repo][0].number, "a sample", emit=True)
        [event] = [e for e in rig.take_events() if e["event"] == "issue_comment"]
        payload: dict[str, Any] = event["payload"]
        return payload

    async def run(self, rate: int) -> tuple[list[float], list[int], dict[str, float]]:
        """Send every delivery when due; each one's latency, status, and the 👀 paths'
        due times."""
        latencies = [0.0] * len(self.deliveries)
        statuses = [0] * len(self.deliveries)
        due_of: dict[str, float] = {}
        url = urlsplit(self.rig.webhook_url)
        requests = [_raw_request(url.hostname or "127.0.0.1", url.path, body, headers)
                    for body, headers, _ in self.deliveries]
        pool = _Connections(url.hostname or "127.0.0.1", url.port or 80)
        # The sender's own pauses would be charged to the server: it is a few lines of
        # asyncio over plain sockets (no client library's pool), its garbage collector is
        # off for the run, and each request is started when due.
        gc.collect()
        gc.disable()
        try:
            start = time.monotonic() + 0.5

            async def one(i: int, due: float) -> None:
                path = self.deliveries[i][2]
                if path is not None:
                    due_of[path] = due
                statuses[i] = await pool.send(requests[i])
                latencies[i] = time.monotonic() - due

            running: set[asyncio.Task[None]] = set()
            for i in range(len(self.deliveries)):
                due = start + i / rate
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                task = asyncio.ensure_future(one(i, due))
                running.add(task)
                task.add_done_callback(running.discard)
            await asyncio.gather(*running)
            failed = [i for i, status in enumerate(statuses) if status == 0]
            if failed:
                raise RuntimeError(f"{len(failed)} deliveries got no answer")
        finally:
            gc.enable()
            pool.close()
        return latencies, statuses, due_of


def _raw_request(host: str, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}",
             *(f"{name}: {value}" for name, value in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Connections:
    """Keep-alive HTTP/1.1 connections, one request at a time on each: the status of each
    answer (its body read and dropped)."""

    def __init__(self, host: str, port: int) -> None:
        self._address = (host, port)
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def send(self, raw: bytes) -> int:
        while self._idle:
            reader, writer = self._idle.pop()
            writer.write(raw)
            first = await reader.readline()
            if first:
                return await self._rest(reader, writer, first)
            # The server closed this idle connection (its keep-alive timeout) before
            # reading the request: another one takes it.
            writer.close()
        reader, writer = await asyncio.open_connection(*self._address)
        writer.write(raw)
        return await self._rest(reader, writer, await reader.readline())

    async def _rest(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    first: bytes) -> int:
        status = int(first.split()[1])
        length, close = 0, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
        await reader.readexactly(length)
        if close:
            writer.close()
        else:
            self._idle.append((reader, writer))
        return status

    def close(self) -> None:
        for _, writer in self._idle:
            writer.close()


def reactions(rig: ChaosRig, paths: dict[str, float], ceiling: float = 300
              ) -> dict[str, float]:
    """When the simulator received each 👀, once all have arrived."""
    deadline = time.monotonic() + ceiling
    while True:
        seen = {r["path"]: r["monotonic"] for r in rig.chaos("GET", "reactions")
                if r["status"] in (200, 201)}
        if all(p in seen for p in paths) or time.monotonic() > deadline:
            return {p: seen[p] for p in paths if p in seen}
        rig.take_events()
        time.sleep(0.5)


def run(backend: str, rate: int, seconds: int, triggers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-sustained-") as tmp:
        if backend == "postgres":
            with throwaway_database() as conninfo:
                url, password = as_url(conninfo)
                return _run(Path(tmp), rate, seconds, triggers, url, password)
        return _run(Path(tmp), rate, seconds, triggers, None, None)


def _run(root: Path, rate: int, seconds: int, triggers: int, url: str | None,
         password: str | None) -> dict[str, Any]:
    mentions = triggers * seconds
    rig = ChaosRig(root, RigSettings(
        repos=8, existing_pulls=max(1, -(-mentions // 8)), new_pulls=0,
        engine_seconds=(0.2, 0.5),
        workers=int(os.environ.get("BENCH_WORKERS", "2")), lease_seconds=120,
        wall_clock_seconds=30, poll_interval=60,
        store_url=url, store_password=password))
    try:
        rig.lay_out()
        rig.start_simulator()
        rig.start_serve()
        rig.wait_seeded()
        load = Load(rig, rate, seconds, triggers)
        latencies, statuses, due = asyncio.run(load.run(rate))
        arrived = reactions(rig, due)
        answered = [s for s in statuses if 200 <= s < 300]
        ids = {headers["X-GitHub-Delivery"] for (_, headers, _), s in
               zip(load.deliveries, statuses, strict=True) if 200 <= s < 300}
        recorded = {r["delivery_id"] for r in rig.rows("SELECT delivery_id FROM deliveries")}
        eyes = [arrived[p] - due[p] for p in due if p in arrived]
        return {
            "backend": "postgres" if url else "sqlite", "rate": rate, "seconds": seconds,
            "deliveries": len(statuses), "answered_2xx": len(answered),
            "other_statuses": sorted({s for s in statuses if not 200 <= s < 300}),
            "durable": ids <= recorded, "recorded_not_answered": len(recorded - ids),
            "p50_ms": _ms(percentile(latencies, 50)), "p99_ms": _ms(percentile(latencies, 99)),
            "max_ms": _ms(max(latencies)),
            "eyes": len(eyes), "eyes_missing": len(due) - len(eyes),
            "eyes_p50_ms": _ms(percentile(eyes, 50)) if eyes else None,
            "eyes_p99_ms": _ms(percentile(eyes, 99)) if eyes else None,
        }
    finally:
        rig.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200, help="deliveries per second")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--triggers", type=int, default=1,
                        help="of them, @claude review comments per second")
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"],
                        choices=["sqlite", "postgres"])
    args = parser.parse_args(argv)
    results = [run(b, args.rate, args.seconds, args.triggers) for b in args.backends]
    print(f"{'backend':<9} {'sent':>6} {'2xx':>6} {'durable':>8} {'p50':>8} {'p99':>8} "
          f"{'max':>8} {'👀':>4} {'👀 p50':>9} {'👀 p99':>9}")
    for r in results:
        print(f"{r['backend']:<9} {r['deliveries']:>6} {r['answered_2xx']:>6} "
              f"{r['durable']!s:>8} {r['p50_ms']:>6.1f}ms {r['p99_ms']:>6.1f}ms "
              f"{r['max_ms']:>6.1f}ms {r['eyes']:>4} {r['eyes_p50_ms']!s:>7}ms "
              f"{r['eyes_p99_ms']!s:>7}ms")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
