"""What an unauthenticated client can hold of the web server, over real sockets to uvicorn
as ``serve`` runs it (``service.app.http_guard``, and the route's body budget): every bound,
each with a small limit so the test is quick, never a sleep the test relies on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.waiting import CEILING
from tests.webhook_env import Env, open_env, serving

pytestmark = pytest.mark.anyio

LIMITS: dict[str, Any] = {
    "max_header_bytes": 4096, "header_timeout_seconds": 1, "body_timeout_seconds": 1,
    "idle_timeout_seconds": 1, "max_connections": 4, "max_buffered_body_bytes": 40_000,
}


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Env, int]]:
    async with open_env(tmp_path, server=LIMITS) as env, serving(
            env.app, env.config.server) as server:
        yield env, server.port


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection (bounded by the
    ceiling: a server that never closes fails the test)."""
    return await asyncio.wait_for(reader.read(), CEILING)


async def test_headers_past_the_limit_are_431_and_the_connection_closed(
        served: tuple[Env, int]) -> None:
    _, port = served
    reader, writer = await connect(port)
    # Five times the limit, then the client waits: the server has read it all when it
    # answers, so its close is a clean one (a close with unread bytes would be a reset).
    writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\n"
                 + b"".join(b"X-Filler-%d: " % n + b"a" * 1000 + b"\r\n" for n in range(20)))
    await writer.drain()
    answer = await closed_by_server(reader)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 431 ")


async def test_a_request_that_never_finishes_its_headers_is_disconnected(
        served: tuple[Env, int]) -> None:
    _, port = served
    reader, writer = await connect(port)
    started = time.monotonic()
    writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    await writer.drain()
    assert await closed_by_server(reader) == b""
    writer.close()
    assert time.monotonic() - started >= 0.9  # by the deadline, not before it


async def test_a_body_that_never_arrives_is_disconnected_and_nothing_recorded(
        served: tuple[Env, int]) -> None:
    env, port = served
    reader, writer = await connect(port)
    started = time.monotonic()
    writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"X-GitHub-Event: ping\r\nX-GitHub-Delivery: d-slow\r\n"
                 b"Content-Length: 30000\r\n\r\n" + b"{" * 10)
    await writer.drain()
    assert await closed_by_server(reader) == b""
    writer.close()
    assert time.monotonic() - started >= 0.9
    assert env.rows("deliveries") == []


async def test_a_connection_that_sends_nothing_is_closed(served: tuple[Env, int]) -> None:
    _, port = served
    reader, writer = await connect(port)
    started = time.monotonic()
    assert await closed_by_server(reader) == b""
    writer.close()
    assert time.monotonic() - started >= 0.9


async def test_past_the_connection_cap_a_new_one_is_503_and_closed(
        served: tuple[Env, int]) -> None:
    _, port = served
    held = [await connect(port) for _ in range(LIMITS["max_connections"])]
    for _, writer in held:  # each has begun a request, so none is idle
        writer.write(b"POST /webhook HTTP/1.1\r\nHost: x\r\n")
        await writer.drain()
    reader, writer = await connect(port)
    answer = await closed_by_server(reader)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 503 ") and b"too many connections" in answer
    for _, writer in held:
        writer.close()


async def test_body_bytes_held_at_once_are_bounded_across_connections(
        served: tuple[Env, int]) -> None:
    """One client declares 30 000 bytes and holds them back; another's 30 000 would pass
    the 40 000 held at once: it is 503 before its body is read. Once the first is gone,
    the second is heard (401: it is not signed)."""
    _, port = served
    head = (b"POST /webhook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"X-GitHub-Event: ping\r\nX-GitHub-Delivery: d-{n}\r\nContent-Length: 30000\r\n\r\n")
    holder_reader, holder = await connect(port)
    holder.write(head.replace(b"{n}", b"1") + b"{" * 100)
    await holder.drain()

    async def second() -> bytes:
        reader, writer = await connect(port)
        writer.write(head.replace(b"{n}", b"2") + b" " * 30000)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(4096), CEILING)
        writer.close()
        return answer

    # The holder's request has reached the route once the budget holds its bytes.
    deadline = time.monotonic() + CEILING
    while b"503" not in (busy := await second()):
        assert time.monotonic() < deadline, busy
    holder.close()
    await closed_by_server(holder_reader)
    deadline = time.monotonic() + CEILING
    while b"401" not in (heard := await second()):
        assert time.monotonic() < deadline, heard
    assert busy.startswith(b"HTTP/1.1 503 ") and b"retry-after: 5" in busy
