"""What makes a ``serve`` process a server: its listening socket, uvicorn behind the
guard (``http_guard``), and the process's own settings — its file limit, its garbage
collector, its event loop. The composition root (daemon.py) calls these; tests and the
webhook benchmark serve the App through the same ``web_server``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
import socket
from collections.abc import Callable
from typing import Any, Final

import uvicorn
from fastapi import FastAPI

from service.app.http_guard import GuardLimits, guarded_protocol
from service.config.connections import ServerConfig

#: How long uvicorn lets open requests finish once a stop is asked for.
GRACEFUL_SECONDS: Final = 10


def web_server(app: FastAPI, server: ServerConfig | None = None) -> uvicorn.Server:
    """uvicorn serving ``app`` as ``serve`` does; ``serve(sockets=...)`` runs it.

    uvicorn's own options only: its httptools parser (C), no access log, no proxy-header
    rewrite, and in front of its protocol the guard that bounds what an unauthenticated
    client can hold (``service.app.http_guard``: header bytes, deadlines, connections), with
    ``server``'s limits (its defaults when None). While it serves, uvicorn takes SIGINT and
    SIGTERM (its cooperative signal handling): it stops accepting, finishes the requests
    it has, and once it has stopped raises the signal again for the daemon's handlers,
    which stop the rest (``service.app.shutdown``).
    """
    server = server or ServerConfig()
    options: dict[str, Any] = {
        "lifespan": "off", "log_config": None, "access_log": False, "server_header": False,
        "timeout_graceful_shutdown": GRACEFUL_SECONDS,
        # Nothing reads the client's address (no access log, no per-IP rule), so the
        # X-Forwarded-For rewrite would be work on every request for nothing.
        "proxy_headers": False,
    }
    # uvicorn's own httptools protocol, as its public ``http="httptools"`` names it.
    parsed = uvicorn.Config(app, http="httptools", **options)
    parsed.load()
    limits = GuardLimits(
        max_header_bytes=server.max_header_bytes,
        header_timeout_seconds=server.header_timeout_seconds,
        body_timeout_seconds=server.body_timeout_seconds,
        idle_timeout_seconds=server.idle_timeout_seconds,
        max_connections=server.max_connections)
    return uvicorn.Server(uvicorn.Config(
        app, http=guarded_protocol(parsed.http_protocol_class, limits), **options))


def listen(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6, as ``host`` resolves).

    Created with ``IPPROTO_TCP`` spelled out: asyncio turns Nagle's algorithm off
    (TCP_NODELAY) only on sockets whose ``proto`` says TCP, and ``socket.create_server``
    leaves it 0. With Nagle on, a response written as headers then body waits for the
    client's delayed ACK: 40 ms added to every JSON answer.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP,
        flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


#: Allocations between young-generation collections (CPython's default: 700). A webhook's
#: parsed payload is about a thousand short-lived, acyclic objects that reference counting
#: frees at once; at 700 the cyclic collector would still run on every delivery.
GC_THRESHOLD: Final = (20_000, 20, 20)


def raise_file_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open files to its hard limit (what a systemd
    ``LimitNOFILE`` or a container runtime allows), as servers do: each connection is a
    descriptor, and ``server.max_connections`` must fit under it. The limits after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def settle_garbage_collector() -> None:
    """For a ``serve`` process, once its code and config are loaded: what exists now lives
    as long as the process, so it is frozen out of the collector's scans (``gc.freeze``:
    every full collection would otherwise walk it, a pause in the webhook route's tail),
    and the young generation is collected less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (a dependency on Linux and macOS): the
    webhook route spends much of its time in the loop's own machinery, which uvloop does in
    C. None: asyncio's default loop."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop
