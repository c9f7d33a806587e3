"""Webhook ingest beside Probot, on GitHub's own payload, with wrk: same-run ratios.

    python -m tests.bench.bench_probot [--rounds 5] [--seconds 4] [--concurrency 16 1]
                                       [--backends sqlite postgres] [--profile FILE.svg]

Three servers, each its own process on loopback:

- ``serve``: ``python -m service serve --role web`` on a real config (a SQLite file with
  ``synchronous = FULL``, or a throwaway PostgreSQL database with ``--backends postgres``),
  logging JSON at INFO to a file, as in production: it answers only after the delivery and
  its enqueue are committed;
- ``bare``: a FastAPI route in the same venv that reads the body and answers 202;
- ``probot``: Probot 14 (``createNodeMiddleware``, ``app.on("pull_request.opened")`` doing
  nothing): it verifies the signature and dispatches in memory, storing nothing.

The load is wrk (Debian's package), 1 thread, ``--concurrency`` keep-alive connections,
``--seconds`` per round, each request GitHub's ``pull_request`` ``opened`` example from
``@octokit/webhooks-examples`` (with an ``installation``, pretty-printed as GitHub sends it),
correctly signed, with a new ``X-GitHub-Delivery`` each time (a wrk Lua script). Probot and
the examples are installed with npm into a cache folder
(``~/.cache/pr-review-agent/bench-probot``), not by the test suite. Rounds alternate between
the servers (serve, bare, probot; then bare, probot, serve; …) so that a slow spell of the
shared machine weighs on all of them; each figure is the median of the rounds, and each
ratio the median of the rounds' ratios. ``serve``'s resident memory is read (``/proc``)
idle, before the load, and at its peak after each round. ``--profile`` records ``serve``
under one more round with py-spy (``pip install py-spy``) into a flame graph.

Ends with the figures as one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.kit.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pr-review-agent" \
    / "bench-probot"
PROBOT = "probot@14"
EXAMPLES = "@octokit/webhooks-examples@7"
SECRET = "bench-webhook-secret"
HOST = "127.0.0.1"
SERVERS = ("serve", "bare", "probot")

PROBOT_APP = """
import http from "node:http";
import { Probot, createNodeMiddleware } from "probot";
const probot = new Probot({ appId: 1, privateKey: process.env.APP_KEY,
                            secret: process.env.SECRET, logLevel: "warn" });
const middleware = await createNodeMiddleware(
  (app) => { app.on("pull_request.opened", async () => {}); },
  { probot, webhooksPath: "/webhook" });
http.createServer((req, res) => middleware(req, res, () => { res.writeHead(404); res.end(); }))
  .listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
"""

BARE_APP = """
from fastapi import FastAPI, Request
from fastapi.responses import Response
app = FastAPI()
@app.post("/webhook")
async def webhook(request: Request) -> Response:
    await request.body()
    return Response(status_code=202)
"""

WRK_SCRIPT = """
wrk.method = "POST"
wrk.body = io.open("{body}", "rb"):read("*a")
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-GitHub-Event"] = "pull_request"
wrk.headers["X-Hub-Signature-256"] = "{signature}"
wrk.headers["User-Agent"] = "GitHub-Hookshot/bench"
local counter = 0
local prefix = string.format("%08x", math.random(0, 0x7fffffff))
request = function()
  counter = counter + 1
  wrk.headers["X-GitHub-Delivery"] = prefix .. "-" .. counter
  return wrk.format()
end
"""


# -- set-up ------------------------------------------------------------------------------------

def install_probot() -> Path:
    """Probot and GitHub's example payloads, installed once into ``CACHE``."""
    marker = CACHE / "node_modules" / "probot" / "package.json"
    if not marker.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(CACHE), "--no-audit", "--no-fund",
                        "--loglevel=error", PROBOT, EXAMPLES], check=True)
    return CACHE


def real_payload(cache: Path, installation_id: int = 31) -> bytes:
    """GitHub's ``pull_request`` ``opened`` example, with the installation GitHub adds for
    an App, pretty-printed."""
    index = cache / "node_modules" / "@octokit" / "webhooks-examples" / "api.github.com" \
        / "index.json"
    for entry in json.loads(index.read_text()):
        if entry["name"] == "pull_request":
            for example in entry["examples"]:
                if example.get("action") == "opened":
                    node = "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMzE="
                    example["installation"] = {"id": installation_id, "node_id": node}
                    return json.dumps(example, indent=2).encode()
    raise SystemExit("no pull_request.opened example in @octokit/webhooks-examples")



def wait_listening(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), 0.2):
            return
        time.sleep(0.05)
    raise SystemExit(f"{what} did not listen on {port}")


@contextlib.contextmanager
def running(argv: list[str], port: int, what: str, *, env: dict[str, str] | None = None,
            cwd: Path = ROOT, log: Path | None = None) -> Iterator[subprocess.Popen[bytes]]:
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    process = subprocess.Popen(argv, cwd=cwd, env={**os.environ, **(env or {})},
                               stdout=out, stderr=out)
    try:
        wait_listening(port, process, what)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log is not None and not isinstance(out, int):
            out.close()


def serve_config(tmp: Path, port: int, backend: str, store_url: str | None) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp / "app.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (tmp / "webhook").write_text(SECRET)
    store: dict[str, object] = {"path": str(tmp / "state.db")}
    if backend == "postgres":
        assert store_url is not None
        store["url"] = store_url
    # GitHub itself is not needed: the web role asks GET /app in the background, and a
    # closed loopback port answers at once.
    config = {
        "github": {"app_id": 1, "private_key_file": "app.pem", "webhook_secret_file": "webhook",
                   "api_url": f"http://{HOST}:{free_port(HOST)}"},
        "server": {"host": HOST, "port": port, "max_body_bytes": 26_214_400},
        "store": store, "triggers": {},
        "budget": {"session_tokens": 1_000_000, "weekly_tokens": 10_000_000,
                   "max_run_tokens": 50_000},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its children (uvicorn runs in-process: one pid)."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    return int(found[1]) / 1024 if found else 0.0


def hwm_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return int(found[1]) / 1024 if found else 0.0


# -- one round ---------------------------------------------------------------------------------

@dataclass
class Round:
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    errors: int


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(number) * _UNITS[unit]


def wrk_round(url: str, script: Path, concurrency: int, seconds: int) -> Round:
    done = subprocess.run(["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--latency",
                           "-s", str(script), url], capture_output=True, text=True, check=True)
    text = done.stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text)[1])  # type: ignore[index]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", text, re.MULTILINE)[1])  # type: ignore[index]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", text, re.MULTILINE)[1])  # type: ignore[index]
    non = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errs = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                     text)
    return Round(rps=rps, p50_ms=p50, p99_ms=p99, non_2xx=int(non[1]) if non else 0,
                 errors=sum(int(g) for g in errs.groups()) if errs else 0)


# -- the run -----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.bench_probot")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16, 1])
    parser.add_argument("--backends", nargs="+", choices=("sqlite", "postgres"),
                        default=["sqlite"])
    parser.add_argument("--profile", help="py-spy profile of serve under load: a flame graph "
                        "(.svg) or collapsed stacks (.txt)")
    parser.add_argument("--earlier", type=int, nargs="+", metavar="N",
                        help="instead: serve on an empty store beside serve on a store holding "
                        "N earlier deliveries (received over the last week, as pruning leaves "
                        "them), alternating rounds at the first --concurrency")
    args = parser.parse_args(argv)
    for tool in ("wrk", "node", "npm"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed: apt-get install wrk nodejs npm")
    cache = install_probot()
    body = real_payload(cache)
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    results: dict[str, object] = {"payload_bytes": len(body), "cores": os.cpu_count(),
                                  "backends": {}}
    print(f"payload: GitHub's pull_request.opened example, {len(body)} bytes; "
          f"{os.cpu_count()} cores; wrk 1 thread; {args.seconds:g} s rounds, "
          f"{args.rounds} per server")
    with tempfile.TemporaryDirectory(prefix="bench-probot-") as scratch:
        tmp = Path(scratch)
        (tmp / "body.json").write_bytes(body)
        script = tmp / "deliveries.lua"
        script.write_text(WRK_SCRIPT.format(body=tmp / "body.json", signature=signature))
        (tmp / "bare_app.py").write_text(BARE_APP)
        # Beside its node_modules: ES modules resolve packages from the script's folder.
        (CACHE / "bench-app.mjs").write_text(PROBOT_APP)
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()).decode()
        if args.earlier:
            results["earlier"] = {n: run_growth(tmp, script, n, args) for n in args.earlier}
        else:
            for backend in args.backends:
                results["backends"][backend] = run_backend(  # type: ignore[index]
                    backend, tmp, script, key, args)
    print(json.dumps(results))
    return 0


def run_backend(backend: str, tmp: Path, script: Path, key: str,
                args: argparse.Namespace) -> dict[str, object]:
    here = tmp / backend
    here.mkdir()
    ports = {name: free_port(HOST) for name in SERVERS}
    with contextlib.ExitStack() as stack:
        url = None
        if backend == "postgres":
            sys.path.insert(0, str(ROOT))
            from tests.databases import as_url, throwaway_database

            url, _ = as_url(stack.enter_context(throwaway_database()))  # local socket: peer auth
        config = serve_config(here, ports["serve"], backend, url)
        serve = stack.enter_context(running(
            [sys.executable, "-m", "service", "serve", "--config", str(config), "--role", "web",
             "--log-format", "json"], ports["serve"], "serve", log=here / "serve.log"))
        stack.enter_context(running(
            [sys.executable, "-m", "uvicorn", "bare_app:app", "--host", HOST, "--port",
             str(ports["bare"]), "--log-level", "warning", "--no-access-log"],
            ports["bare"], "bare", cwd=tmp))
        stack.enter_context(running(
            ["node", str(CACHE / "bench-app.mjs")], ports["probot"], "probot",
            env={"APP_KEY": key, "SECRET": SECRET, "PORT": str(ports["probot"])}, cwd=CACHE))
        time.sleep(1.0)
        idle = rss_mb(serve.pid)
        figures: dict[str, object] = {"serve_idle_rss_mb": round(idle, 1)}
        for concurrency in args.concurrency:
            figures[f"c{concurrency}"] = compare(ports, script, concurrency, args)
        figures["serve_peak_rss_mb"] = round(hwm_mb(serve.pid), 1)
        if args.profile:
            profile(serve.pid, ports["serve"], script, args)
    print_backend(backend, figures)
    return figures


def fill_deliveries(path: Path, count: int) -> None:
    """``count`` earlier deliveries in the store at ``path``: random GitHub-style GUIDs,
    received over the last week (what pruning keeps), in batches of 100 000."""
    import sqlite3
    import uuid
    from datetime import UTC, datetime, timedelta

    from service.storage.sqlite import SqliteStore
    from service.storage.times import to_db_time

    SqliteStore(path).close()  # created and migrated as serve would
    now = datetime.now(UTC)
    week = timedelta(days=7).total_seconds()
    with sqlite3.connect(path) as conn:
        for start in range(0, count, 100_000):
            rows = [(str(uuid.uuid4()), "pull_request", "labeled", 31,
                     to_db_time(now - timedelta(seconds=week * (1 - i / count))),
                     "ignored:action:labeled")
                    for i in range(start, min(count, start + 100_000))]
            conn.executemany("INSERT INTO deliveries VALUES (?, ?, ?, ?, ?, ?)", rows)
            conn.commit()
    conn.close()


def run_growth(tmp: Path, script: Path, count: int,
               args: argparse.Namespace) -> dict[str, object]:
    """Ingest on an empty store beside ingest at ``count`` earlier deliveries."""
    concurrency = args.concurrency[0]
    here = tmp / f"earlier-{count}"
    ports = {"empty": free_port(HOST), "full": free_port(HOST)}
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        for name, port in ports.items():
            folder = here / name
            folder.mkdir(parents=True)
            config = serve_config(folder, port, "sqlite", None)
            if name == "full":
                fill_deliveries(folder / "state.db", count)
            stack.enter_context(running(
                [sys.executable, "-m", "service", "serve", "--config", str(config), "--role",
                 "web", "--log-format", "json"], port, name, log=folder / "serve.log"))
        filled = time.monotonic() - started
        rounds: dict[str, list[Round]] = {name: [] for name in ports}
        for name, port in ports.items():
            wrk_round(f"http://{HOST}:{port}/webhook", script, concurrency, 1)
        for _ in range(args.rounds):
            for name, port in ports.items():
                rounds[name].append(wrk_round(f"http://{HOST}:{port}/webhook", script,
                                              concurrency, args.seconds))
    ratios = [f.rps / e.rps for f, e in zip(rounds["full"], rounds["empty"], strict=True)]
    spread = [round(min(ratios), 3), round(max(ratios), 3)]
    out: dict[str, object] = {
        "rps_empty": round(statistics.median(r.rps for r in rounds["empty"]), 1),
        "rps_full": round(statistics.median(r.rps for r in rounds["full"]), 1),
        "full_over_empty": round(statistics.median(ratios), 3),
        "range": spread, "setup_seconds": round(filled, 1)}
    print(f"\n{count} earlier deliveries, concurrency {concurrency}: {out['rps_full']} req/s "
          f"beside {out['rps_empty']} on an empty store: {out['full_over_empty']} (rounds "
          f"{spread[0]}–{spread[1]})")
    return out


def compare(ports: dict[str, int], script: Path, concurrency: int,
            args: argparse.Namespace) -> dict[str, object]:
    rounds: dict[str, list[Round]] = {name: [] for name in SERVERS}
    for name in SERVERS:  # warm each one up (JIT, page cache, connection pools)
        wrk_round(f"http://{HOST}:{ports[name]}/webhook", script, concurrency, 1)
    for cycle in range(args.rounds):
        # Each server takes each place in the order in turn, so that none always follows
        # the same one.
        shift = cycle % len(SERVERS)
        for name in SERVERS[shift:] + SERVERS[:shift]:
            rounds[name].append(wrk_round(f"http://{HOST}:{ports[name]}/webhook", script,
                                          concurrency, args.seconds))
    out: dict[str, object] = {}
    for name, got in rounds.items():
        out[name] = {"rps": round(statistics.median(r.rps for r in got), 1),
                     "p50_ms": round(statistics.median(r.p50_ms for r in got), 2),
                     "p99_ms": round(statistics.median(r.p99_ms for r in got), 2),
                     "non_2xx": sum(r.non_2xx for r in got),
                     "errors": sum(r.errors for r in got)}
    ratios = [s.rps / p.rps for s, p in zip(rounds["serve"], rounds["probot"], strict=True)]
    bare = [s.rps / b.rps for s, b in zip(rounds["serve"], rounds["bare"], strict=True)]
    out["serve_over_probot"] = round(statistics.median(ratios), 3)
    out["serve_over_probot_range"] = [round(min(ratios), 3), round(max(ratios), 3)]
    out["serve_over_bare"] = round(statistics.median(bare), 3)
    return out


def profile(pid: int, port: int, script: Path, args: argparse.Namespace) -> None:
    spy_bin = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy_bin).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    kind = "raw" if args.profile.endswith(".txt") else "flamegraph"  # .txt: collapsed stacks
    spy = subprocess.Popen([spy_bin, "record", "--pid", str(pid), "--output", args.profile,
                            "--format", kind,
                            "--duration", str(args.seconds + 2), "--rate", "250",
                            "--nonblocking"])
    time.sleep(1.0)
    wrk_round(f"http://{HOST}:{port}/webhook", script, 16, args.seconds)
    spy.wait()


def print_backend(backend: str, figures: dict[str, object]) -> None:
    print(f"\n{backend}: serve idle RSS {figures['serve_idle_rss_mb']} MB, peak "
          f"{figures['serve_peak_rss_mb']} MB")
    print(f"{'concurrency':>11}  {'server':<7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'non-2xx':>8}")
    for key, value in figures.items():
        if not key.startswith("c") or not isinstance(value, dict):
            continue
        for name in SERVERS:
            row = value[name]
            print(f"{key[1:]:>11}  {name:<7} {row['rps']:>9} {row['p50_ms']:>8} "
                  f"{row['p99_ms']:>8} {row['non_2xx']:>8}")
        print(f"{'':>11}  serve/probot {value['serve_over_probot']} (rounds "
              f"{value['serve_over_probot_range'][0]}–{value['serve_over_probot_range'][1]}),"
              f" serve/bare {value['serve_over_bare']}")


if __name__ == "__main__":
    sys.exit(main())
