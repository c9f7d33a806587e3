"""Run the simulator standalone: ``python -m tests.simulator --port 0 --state state.json``.

It binds 127.0.0.1 (port 0 picks a free port), prints its base URL as the first line of
stdout, flushed, then serves until SIGINT/SIGTERM. ``--activity`` adds the routes through
which a driver in another process acts as GitHub's users (``routes_activity.py``).
Payload URLs in emitted webhooks use that base URL.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from .app import SimulatorApp
from .routes_activity import ActivityRoutes
from .seed import load_world
from .state import World


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulator",
                                     description="A simulated GitHub REST API.")
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: pick a free one)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1; keep it on loopback)")
    parser.add_argument("--state", type=Path, help="JSON state file to seed the world from")
    parser.add_argument("--prefix", default="", help="serve under a path, e.g. /api/v3")
    parser.add_argument("--activity", action="store_true",
                        help="also serve /_simulator/activity/ (routes_activity.py): open "
                             "pull requests, comment, take the webhooks, read the posts")
    args = parser.parse_args(argv)
    try:
        world = load_world(args.state) if args.state else World()
    except (OSError, ValueError, KeyError) as exc:
        print(f"cannot load state: {exc}", file=sys.stderr)
        return 2
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    # Listening before the URL is printed: a client may connect the moment it reads it
    # (the backlog holds it until uvicorn accepts), instead of being refused.
    sock.listen(128)
    port = sock.getsockname()[1]
    base_url = f"http://{args.host}:{port}{args.prefix.rstrip('/')}"
    world.api_url = base_url
    if world.web_url == "https://github.com":  # not set by the seed: it serves its own pages
        world.web_url = f"http://{args.host}:{port}"
    print(base_url, flush=True)
    # asyncio's own loop, not uvloop (a dependency of the service): the simulator's dropped
    # connections (faults.py) are modelled on how that loop's transports abort.
    app: ASGIApp = SimulatorApp(world, prefix=args.prefix)
    if args.activity:
        app = ActivityRoutes(world, app)
    config = uvicorn.Config(app, http="h11",
                            loop="asyncio", lifespan="on", log_level="warning",
                            access_log=False,
                            date_header=False, server_header=False)
    stopped: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        # uvicorn shuts down gracefully on these, then re-raises them to the handler that
        # was installed before it; recording them here makes a requested stop exit 0.
        signal.signal(sig, lambda number, _frame: stopped.append(number))
    uvicorn.Server(config).run(sockets=[sock])
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
