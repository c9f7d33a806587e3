"""What unsigned traffic can make ``serve`` hold: its memory under the attacks that found
the holes, and whether the bounds end them.

    python -m tests.bench.bench_attacks [--connections 16]

``serve --role web`` on a real config with the default bounds (``server.*``:
docs/SECURITY.md), then, one after the other, ``--connections`` clients each:

- ``slow body``: declare a 25 MiB body (unsigned), send 1 MiB of it, then one byte a
  second;
- ``huge headers``: send 24 MB of header lines as fast as the server reads them;
- ``idle``: open a connection and send nothing;

and, last, 2 000 connections at once, each beginning a request. For each: ``serve``'s
resident memory before, at its peak and after the clients are gone, how the server ended
the connections (closed, answered 431 or 503) and after how long. The figures are printed
and written as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.bench_probot import hwm_mb, rss_mb, running, serve_config
from tests.kit.ports import free_port

HOST = "127.0.0.1"


async def _slow_body(port: int) -> str:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 26214400\r\nX-GitHub-Event: ping\r\n"
                 b"X-GitHub-Delivery: d\r\n\r\n" + b" " * 1_048_576)
    try:
        while True:
            await writer.drain()
            got = await asyncio.wait_for(reader.read(100), 1.0)
            if got == b"":
                return "closed"
            if got:
                return got.split(b"\r\n")[0].decode()
    except TimeoutError:
        pass
    except ConnectionError:
        return "reset"
    # Trickle until the server ends it.
    try:
        while True:
            writer.write(b" ")
            await writer.drain()
            try:
                got = await asyncio.wait_for(reader.read(100), 1.0)
            except TimeoutError:
                continue
            return "closed" if got == b"" else got.split(b"\r\n")[0].decode()
    except ConnectionError:
        return "reset"
    finally:
        writer.close()


async def _huge_headers(port: int) -> str:
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
    line = b"X-Filler: " + b"a" * 1000 + b"\r\n"
    try:
        for _ in range(24_000):
            writer.write(line)
            await writer.drain()
    except ConnectionError:
        pass
    try:
        got = await asyncio.wait_for(reader.read(100), 60)
        return "closed" if got == b"" else got.split(b"\r\n")[0].decode()
    except (ConnectionError, TimeoutError):
        return "reset"
    finally:
        writer.close()


async def _idle(port: int) -> str:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        got = await asyncio.wait_for(reader.read(100), 120)
        return "closed" if got == b"" else got.split(b"\r\n")[0].decode()
    except ConnectionError:
        return "reset"
    finally:
        writer.close()


async def _begun(port: int) -> str:
    try:
        reader, writer = await asyncio.open_connection(HOST, port)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
    try:
        got = await asyncio.wait_for(reader.read(100), 120)
        return "closed" if got == b"" else got.split(b"\r\n")[0].decode()
    except (ConnectionError, TimeoutError):
        return "reset"
    finally:
        writer.close()


ATTACKS = {"slow body": _slow_body, "huge headers": _huge_headers, "idle": _idle}


async def _attack(kind: str, port: int, clients: int, pid: int) -> dict[str, Any]:
    before = rss_mb(pid)
    started = time.monotonic()
    peak = before
    tasks = [asyncio.ensure_future(ATTACKS[kind](port)) for _ in range(clients)]
    while not all(t.done() for t in tasks):
        peak = max(peak, rss_mb(pid))
        await asyncio.sleep(0.1)
    ended = time.monotonic() - started
    await asyncio.sleep(2)
    endings: dict[str, int] = {}
    for task in tasks:
        endings[task.result()] = endings.get(task.result(), 0) + 1
    return {"attack": kind, "clients": clients, "rss_before_mb": round(before, 1),
            "rss_peak_mb": round(peak, 1), "rss_after_mb": round(rss_mb(pid), 1),
            "ended_after_s": round(ended, 1), "endings": endings}


async def _flood(port: int, pid: int, count: int) -> dict[str, Any]:
    before = rss_mb(pid)
    tasks = [asyncio.ensure_future(_begun(port)) for _ in range(count)]
    peak = before
    while not all(t.done() for t in tasks):
        peak = max(peak, rss_mb(pid))
        await asyncio.sleep(0.1)
    endings: dict[str, int] = {}
    for task in tasks:
        endings[task.result()] = endings.get(task.result(), 0) + 1
    return {"attack": f"{count} connections", "clients": count,
            "rss_before_mb": round(before, 1), "rss_peak_mb": round(peak, 1),
            "rss_after_mb": round(rss_mb(pid), 1), "endings": endings}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-attacks-") as scratch:
        tmp = Path(scratch)
        port = free_port()
        config = serve_config(tmp, port, "sqlite", None)
        with running([sys.executable, "-m", "service", "serve", "--config", str(config),
                      "--role", "web", "--log-format", "json"], port, "serve",
                     log=tmp / "serve.log") as serve:
            time.sleep(1.0)
            for kind in ATTACKS:
                results.append(asyncio.run(_attack(kind, port, args.connections, serve.pid)))
            results.append(asyncio.run(_flood(port, serve.pid, 2000)))
            results.append({"serve_peak_rss_mb": round(hwm_mb(serve.pid), 1)})
    for r in results[:-1]:
        print(f"{r['attack']:<18} rss {r['rss_before_mb']} -> peak {r['rss_peak_mb']} -> "
              f"after {r['rss_after_mb']} MB; {r.get('ended_after_s', '-')} s; {r['endings']}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
