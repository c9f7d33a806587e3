"""Webhook ingest against a bare FastAPI endpoint, side by side, on one real uvicorn.

    python -m tests.bench.bench_webhooks [--requests 4000] [--rounds 8]
                                         [--concurrency 1 16 64]
                                         [--backends sqlite postgres] [--replicas 1 2]

A child process serves the receiver exactly as ``pr-review-agent serve --role web`` builds
it (``create_app`` with a real SQLite file in WAL mode with synchronous=FULL, JSON log lines
at INFO to a file, uvicorn as ``serve`` runs it — httptools, uvloop, the webhook's fast
path, no proxy-header rewrite — on 127.0.0.1), plus one extra route, ``POST /bare``,
that answers 202 without reading, verifying or storing anything. This process is the load
generator: ``concurrency`` keep-alive connections, each sending its next request as soon as
the previous answer arrives, over a minimal HTTP/1.1 client (pre-built request bytes, so
the client's own cost stays small next to the server's).

Every webhook request is a distinct, correctly signed delivery in GitHub's shape that
enqueues a new row: half ``pull_request`` ``opened`` (new pull request number), half
``issue_comment`` ``created`` with "@claude review" (new comment id). The bare route gets
the same bytes. Per concurrency level the two routes alternate in ``--rounds`` short
rounds (bare first in each), so that a slow spell of a shared machine weighs on both; the
table gives the median throughput of the rounds, p50 and p99 latency over all of them, the
server process's CPU time per request (Linux ``/proc``), and the webhook/bare throughput
ratio as the median of the rounds' ratios with their range; the run ends by checking that the
store holds exactly one delivery and one queue row for every webhook request sent (exit 1
if not). The last line is the same figures as JSON.

With ``--backends`` the comparison runs once per backend and replica count: the store is
the SQLite file, or a throwaway PostgreSQL database on the local server (as the tests make
one), and with ``--replicas 2`` two such servers share it, each connection of the load
going to one of them in turn (any replica takes any delivery). A last table puts each
PostgreSQL figure beside SQLite's on one host.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

from fastapi.responses import Response

from tests.kit.ports import free_port

SECRET = "bench-webhook-secret"
APP_ID = 424242
HOST = "127.0.0.1"


# -- the server (child process) ------------------------------------------------------------


async def bare() -> Response:
    """The baseline: a FastAPI route that answers 202 and does nothing else."""
    return Response(status_code=202)


def write_config(directory: Path, port: int, store_url: str | None = None) -> Path:
    from tests.simulator.harness import app_key_pair

    if not (directory / "app.pem").exists():
        (directory / "app.pem").write_text(app_key_pair()[0])
    (directory / "webhook.secret").write_text(SECRET)
    store = "{path: bench.db}" if store_url is None else f'{{url: "{store_url}"}}'
    config = directory / f"config-{port}.yaml"
    config.write_text(
        "github:\n"
        f"  app_id: {APP_ID}\n"
        "  private_key_file: app.pem\n"
        "  webhook_secret_file: webhook.secret\n"
        f"server: {{host: {HOST}, port: {port}}}\n"
        f"store: {store}\n"
        "triggers: {}\n"
        "budget: {session_tokens: 1000000, weekly_tokens: 10000000, max_run_tokens: 50000}\n"
    )
    return config


def serve(config_path: Path, port: int) -> None:
    from service.app.serving import listen, web_server
    from service.app.web import create_app
    from service.budget.governor import Governor
    from service.config.strict_yaml import load_config
    from service.intake.rules.decisions import TriggerContext
    from service.observe.health import Health
    from service.observe.logs import configure_logging
    from service.storage.agent_comments import AgentComments
    from service.storage.open import open_store

    config = load_config(config_path, {})
    log_file = (config_path.parent / "server.log").open("w", encoding="utf-8")
    configure_logging("json", stream=log_file)
    store = open_store(config.store)
    context = TriggerContext(config.triggers, APP_ID, "review-agent", AgentComments(store))
    app = create_app(
        config=config, store=store,
        governor=Governor(store, config.budget), triggers=lambda: context,
        health=Health(store), clock=lambda: datetime.now(UTC),
    )

    app.add_api_route("/bare", bare, methods=["POST"])
    sock = listen(HOST, port)  # the daemon's own listener (TCP_NODELAY on)
    server = web_server(app)  # as serve serves it
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        store.close()
        log_file.close()


# -- the load (this process) ---------------------------------------------------------------


def deliveries(count: int, start: int) -> list[bytes]:
    """``count`` distinct signed deliveries as raw HTTP/1.1 requests to /webhook."""
    from service.github.webhooks import sign
    from tests import payloads as p

    out = []
    for n in range(start, start + count):
        if n % 2:
            event = "pull_request"
            pr = p.pull_request(100_000 + n, head_sha=f"{n:040x}")
            payload = p.pull_request_event("opened", pr)
        else:
            event = "issue_comment"
            comment = p.issue_comment("@claude review", comment_id=1_000_000 + n)
            payload = p.issue_comment_event("created", comment)
        body = json.dumps(payload, separators=(",", ":")).encode()
        out.append(request("/webhook", body, {
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/bench",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(body, SECRET),
        }))
    return out


def request(path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {HOST}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def load(ports: list[int], requests: list[bytes], concurrency: int,
               expect: set[int]) -> tuple[float, list[float]]:
    """Send ``requests`` over ``concurrency`` connections, spread over the servers at
    ``ports`` in turn; (seconds, latencies in s)."""
    pending: Iterator[bytes] = iter(requests)
    latencies: list[float] = []

    async def connection(port: int) -> None:
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            for raw in pending:
                started = time.perf_counter()
                writer.write(raw)
                status = await read_response(reader)
                latencies.append(time.perf_counter() - started)
                if status not in expect:
                    raise RuntimeError(f"unexpected status {status}")
        finally:
            writer.close()
            await writer.wait_closed()

    started = time.perf_counter()
    await asyncio.gather(*(connection(ports[i % len(ports)]) for i in range(concurrency)))
    return time.perf_counter() - started, latencies


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process ``pid`` has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def wait_ready(port: int, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError("the server exited during start-up")
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start listening")



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4000, help="per level and route")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--rounds", type=int, default=8,
                        help="alternating bare/webhook rounds per level")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--backends", nargs="+", default=["sqlite"],
                        choices=["sqlite", "postgres"])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1])
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve is not None:
        serve(args.serve, args.port)
        return 0
    logging.basicConfig(level=logging.WARNING)
    failed = 0
    summary: list[dict[str, object]] = []
    for backend in args.backends:
        for replicas in args.replicas:
            if backend == "sqlite" and replicas > 1:
                continue  # one host's file: replicas are PostgreSQL's
            print(f"\n== {backend}, {replicas} replica(s)")
            code, results = run_setup(args, backend, replicas)
            failed |= code
            summary += [{"backend": backend, "replicas": replicas, **r} for r in results]
    if len(summary) > len(args.concurrency):
        print_summary(summary)
    print(json.dumps(summary))
    return failed


def run_setup(args: argparse.Namespace, backend: str, replicas: int
              ) -> tuple[int, list[dict[str, float]]]:
    """One backend and replica count: start the servers, compare, check the store."""
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        directory = Path(tmp)
        url = None
        if backend == "postgres":
            from tests.databases import as_url, throwaway_database
            url, _ = as_url(stack.enter_context(throwaway_database()))
        ports = [free_port(HOST) for _ in range(replicas)]
        children = []
        try:
            for port in ports:
                config = write_config(directory, port, url)
                children.append(subprocess.Popen(
                    [sys.executable, "-m", "tests.bench.bench_webhooks", "--serve",
                     str(config), "--port", str(port)],
                    cwd=Path(__file__).resolve().parents[2]))
                wait_ready(port, children[-1])
            return asyncio.run(compare(ports, args, [c.pid for c in children],
                                       lambda: stored_counts(directory, url)))
        finally:
            for child in children:
                child.terminate()
                child.wait(timeout=30)


def stored_counts(directory: Path, url: str | None) -> tuple[int, int]:
    """(deliveries, queue rows) in the store."""
    if url is None:
        db = sqlite3.connect(directory / "bench.db")
        try:
            return (db.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0],
                    db.execute("SELECT COUNT(*) FROM queue").fetchone()[0])
        finally:
            db.close()
    import psycopg
    with psycopg.connect(url) as pg:
        deliveries = pg.execute("SELECT COUNT(*) FROM deliveries").fetchone()
        queued = pg.execute("SELECT COUNT(*) FROM queue").fetchone()
    return int(deliveries[0]), int(queued[0])  # type: ignore[index]


def print_summary(summary: list[dict[str, object]]) -> None:
    """Each setup's webhook throughput and p99 beside SQLite's on one host: raw (``vs``),
    and through each setup's own bare route (``vs/bare``: its webhook/bare ratio over
    SQLite's, which the alternating rounds keep clear of the machine's drift between the
    setups, run one after the other)."""
    base = {r["concurrency"]: r for r in summary if r["backend"] == "sqlite"}
    print("\nwebhook route, side by side (vs: throughput / SQLite's at the same concurrency;"
          " vs/bare: webhook/bare ratio / SQLite's)")
    print(f"{'backend':>9} {'replicas':>8} {'conc':>4} {'req/s':>8} {'p99':>7} {'vs':>6} "
          f"{'vs/bare':>7}")
    for r in summary:
        ref = base.get(r["concurrency"])
        vs = norm = ""
        if ref is not None:
            vs = f"{float(r['webhook_rps']) / float(ref['webhook_rps']):6.0%}"  # type: ignore[arg-type]
            norm = f"{float(r['ratio']) / float(ref['ratio']):7.0%}"  # type: ignore[arg-type]
        print(f"{r['backend']:>9} {r['replicas']:>8} {r['concurrency']:>4} "
              f"{float(r['webhook_rps']):>8.0f} {float(r['webhook_p99_ms']):>7.2f} {vs:>6} "  # type: ignore[arg-type]
              f"{norm:>7}")


async def compare(ports: list[int], args: argparse.Namespace, pids: list[int],
                  counts: Callable[[], tuple[int, int]]) -> tuple[int, list[dict[str, float]]]:
    sent = 0
    warm = deliveries(args.warmup, 0)
    sent += len(warm)
    await load(ports, warm, 8, {202})
    await load(ports, [to_bare(raw) for raw in warm], 8, {202})
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {args.requests} requests "
          f"per route and level in {args.rounds} alternating rounds; latency in ms")
    print(f"{'conc':>4} {'route':>8} {'req/s':>8} {'p50':>7} {'p99':>7} {'cpu/req':>8} "
          f"{'ratio':>6} {'rounds':>10}")
    results = []
    per_round = max(1, args.requests // args.rounds)
    for concurrency in args.concurrency:
        # Bare and webhook alternate in short rounds, so that a slow spell of a shared
        # machine hits both routes alike; the ratio is the median of the rounds' ratios.
        rates: dict[str, list[float]] = {"bare": [], "webhook": []}
        latencies: dict[str, list[float]] = {"bare": [], "webhook": []}
        cpu = {"bare": 0.0, "webhook": 0.0}
        for _ in range(args.rounds):
            hooks = deliveries(per_round, sent)
            sent += len(hooks)
            for route, batch in (("bare", [to_bare(raw) for raw in hooks]), ("webhook", hooks)):
                before = sum(cpu_seconds(pid) for pid in pids)
                seconds, took = await load(ports, batch, concurrency, {202})
                cpu[route] += sum(cpu_seconds(pid) for pid in pids) - before
                rates[route].append(len(batch) / seconds)
                latencies[route] += took
        ratios = [w / b for w, b in zip(rates["webhook"], rates["bare"], strict=True)]
        row = {route: (statistics.median(rates[route]),
                       percentile(latencies[route], 50) * 1000,
                       percentile(latencies[route], 99) * 1000,
                       cpu[route] / len(latencies[route]) * 1000) for route in rates}
        ratio = statistics.median(ratios)
        for route in ("bare", "webhook"):
            rate, p50, p99, cpu_ms = row[route]
            shown = f"{ratio:6.0%}" if route == "webhook" else ""
            spread = f"{min(ratios):.0%}-{max(ratios):.0%}" if route == "webhook" else ""
            print(f"{concurrency:>4} {route:>8} {rate:>8.0f} {p50:>7.2f} {p99:>7.2f} "
                  f"{cpu_ms:>8.3f} {shown:>6} {spread:>10}")
        results.append({"concurrency": concurrency, "ratio": ratio,
                        "ratio_min": min(ratios), "ratio_max": max(ratios), **{
                            f"{route}_{name}": value for route in row
                            for name, value in zip(("rps", "p50_ms", "p99_ms", "cpu_ms"),
                                                   row[route], strict=True)}})
    recorded, queued = counts()
    print(f"store: {recorded} deliveries and {queued} queue rows for {sent} webhooks sent")
    return (0 if recorded == queued == sent else 1), results


def to_bare(raw: bytes) -> bytes:
    return raw.replace(b"POST /webhook ", b"POST /bare ", 1)


if __name__ == "__main__":
    sys.exit(main())
