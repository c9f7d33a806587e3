"""What makes a serve process a server: its listening socket, uvicorn behind the guard,
and the process's own settings (serving.py)."""

from __future__ import annotations

import asyncio
import resource
import socket

import httpx
import pytest
from fastapi import FastAPI

from service.app.serving import (
    GRACEFUL_SECONDS,
    event_loop_factory,
    listen,
    raise_file_limit,
    web_server,
)
from service.config.connections import ServerConfig


def test_the_listener_says_it_is_tcp_so_that_asyncio_turns_nagle_off() -> None:
    sock = listen("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP and sock.type == socket.SOCK_STREAM
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR)
        assert sock.getsockname()[1] > 0
    finally:
        sock.close()


def test_a_port_already_taken_is_an_error_and_leaks_no_socket() -> None:
    first = listen("127.0.0.1", 0)
    try:
        with pytest.raises(OSError):
            listen("127.0.0.1", first.getsockname()[1])
    finally:
        first.close()


def test_the_soft_file_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = raise_file_limit()
    assert soft == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def test_the_event_loop_is_uvloops_where_it_is_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    factory = event_loop_factory()
    assert factory is uvloop.new_event_loop


@pytest.mark.anyio
async def test_the_server_serves_the_app_with_uvicorns_options_and_the_guards_limits() -> None:
    app = FastAPI()

    @app.get("/ping")
    async def ping() -> dict[str, str]:
        return {"pong": "yes"}

    server = web_server(app, ServerConfig(max_connections=3))
    assert server.config.timeout_graceful_shutdown == GRACEFUL_SECONDS
    assert not server.config.access_log and not server.config.proxy_headers
    sock = listen("127.0.0.1", 0)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # bounded by the task: a failed start ends it
            assert not task.done(), task.exception()
            await asyncio.sleep(0.01)
        port = sock.getsockname()[1]
        async with httpx.AsyncClient() as client:
            answer = await client.get(f"http://127.0.0.1:{port}/ping")
        assert answer.json() == {"pong": "yes"} and "server" not in answer.headers
    finally:
        server.should_exit = True
        await task
        sock.close()
