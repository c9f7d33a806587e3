"""The webhook route answered from uvicorn's HTTP parser (``service.webhook.fast_path``).

Over a real socket to uvicorn configured as ``serve`` configures it (``web_server``), with
raw HTTP/1.1 bytes so that what is on the wire is the test's to say: a plain delivery is
answered without the ASGI app, exactly as the ASGI route answers it; everything the fast
path leaves to uvicorn still reaches the same receiver; answers keep their order on a
connection; a client gone, a shutdown and a bug each end as DESIGN.md says. The contract
itself runs over this path too (test_webhook_end_to_end.py, ``sqlite-socket``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from starlette.types import Receive, Scope, Send

from service.github.webhooks import sign
from service.web import WebApp
from service.webhook.deliveries import Received, Result
from service.webhook.receiver import OFF_LOOP_BYTES
from tests.webhook_env import SECRET, Env, Served, open_env, opened, pr_key, serving

PATH = "/webhook"


@dataclass
class Counting:
    """The web app, counting the HTTP requests that reach it through ASGI."""

    app: WebApp
    paths: list[str] = field(default_factory=list)

    @property
    def receiver(self) -> Any:
        return self.app.receiver

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


@dataclass
class Rig:
    env: Env
    asgi: Counting
    served: Served

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.served.port)

    def body(self, **changes: Any) -> bytes:
        return json.dumps({**opened(self.env), **changes}).encode()


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    # A body limit above OFF_LOOP_BYTES, so that a larger delivery is one uvicorn serves.
    async with open_env(tmp_path, server={"max_body_bytes": 4 * OFF_LOOP_BYTES}) as env:
        counting = Counting(env.app)
        async with serving(cast(WebApp, counting), PATH) as served:
            yield Rig(env, counting, served)


def request(body: bytes, delivery_id: str, *, event: str = "pull_request", path: str = PATH,
            version: str = "1.1", signature: str | None = None,
            headers: tuple[str, ...] = ()) -> bytes:
    """A delivery as GitHub writes it (``Content-Length`` unless ``headers`` say chunked)."""
    lines = [f"POST {path} HTTP/{version}", "Host: service", "User-Agent: GitHub-Hookshot/1",
             "Content-Type: application/json", f"X-GitHub-Event: {event}",
             f"X-GitHub-Delivery: {delivery_id}",
             f"X-Hub-Signature-256: {signature or sign(body, SECRET)}", *headers]
    if not any(h.lower().startswith("transfer-encoding") for h in headers):
        lines.append(f"Content-Length: {len(body)}")
    else:
        body = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    return "\r\n".join([*lines, "", ""]).encode() + body


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    """One answer off the connection (an interim ``100 Continue`` skipped)."""
    while True:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        headers = {name.strip().lower(): value.strip()
                   for name, _, value in (line.partition(":") for line in head[1:] if line)}
        if status != 100:
            return Answer(status, headers,
                          await reader.readexactly(int(headers["content-length"])))


async def exchange(rig: Rig, *requests: bytes) -> list[Answer]:
    """``requests`` written at once on one connection; their answers, in order."""
    reader, writer = await rig.connect()
    writer.write(b"".join(requests))
    try:
        with anyio.fail_after(10):
            return [await read_answer(reader) for _ in requests]
    finally:
        writer.close()


# -- the fast path --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_plain_delivery_is_answered_without_the_asgi_app(rig: Rig) -> None:
    [answer] = await exchange(rig, request(rig.body(), "d-fast"))

    assert answer.status == 202
    assert answer.json() == {"delivery": "d-fast", "enqueued": [pr_key(rig.env)],
                             "ignored": None}
    assert answer.headers["content-type"] == "application/json"
    assert "date" in answer.headers and "server" not in answer.headers
    assert rig.asgi.paths == []
    assert rig.env.delivery("d-fast")["outcome"] == "enqueued"  # type: ignore[index]


def cases(rig: Rig) -> list[tuple[str, bytes, dict[str, Any]]]:
    """(name, body, request keywords): one of each kind of answer."""
    good = rig.body()
    return [
        ("enqueued", good, {}),
        ("bad signature", good, {"signature": "sha256=" + "0" * 64}),
        ("unsupported algorithm", good, {"signature": "sha1=" + "0" * 40}),
        ("no event", good, {"event": ""}),
        ("unparseable", b"{not json", {}),
        ("not an object", b"[1, 2]", {}),
        ("ping", json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1}).encode(),
         {"event": "ping"}),
        ("ignored event", json.dumps({"action": "starred"}).encode(), {"event": "star"}),
        ("ignored action", rig.body(action="labeled"), {}),
    ]


@pytest.mark.anyio
async def test_every_answer_is_the_one_the_asgi_route_gives(rig: Rig) -> None:
    for name, body, keywords in cases(rig):
        [fast] = await exchange(rig, request(body, f"fast-{name}", **keywords))
        headers = {"Content-Type": "application/json",
                   "X-GitHub-Event": keywords.get("event", "pull_request"),
                   "X-GitHub-Delivery": f"asgi-{name}",
                   "X-Hub-Signature-256": keywords.get("signature") or sign(body, SECRET)}
        routed = await rig.env.client.post(PATH, content=body,
                                           headers={k: v for k, v in headers.items() if v})

        assert fast.status == routed.status_code, name
        assert fast.body.replace(b"fast-", b"asgi-") == routed.content, name
        assert {k: v for k, v in fast.headers.items() if k != "date"} == dict(
            routed.headers), name
    assert rig.asgi.paths == []


@pytest.mark.anyio
async def test_a_redelivery_on_the_fast_path_is_a_duplicate(rig: Rig) -> None:
    [first] = await exchange(rig, request(rig.body(), "d-1"))
    [again] = await exchange(rig, request(rig.body(), "d-1"))

    assert (first.status, again.status) == (202, 200)
    assert again.json() == {"duplicate": True}
    assert len(rig.env.rows("deliveries")) == 1


# -- what it leaves to uvicorn --------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(("name", "keywords"), [
    ("a query string", {"path": PATH + "?source=github"}),
    ("HTTP/1.0", {"version": "1.0"}),
    ("a chunked body", {"headers": ("Transfer-Encoding: chunked",)}),
    ("Expect: 100-continue", {"headers": ("Expect: 100-continue",)}),
])
async def test_what_the_fast_path_leaves_reaches_the_same_receiver(
        rig: Rig, name: str, keywords: dict[str, Any]) -> None:
    [answer] = await exchange(rig, request(rig.body(), "d-left", **keywords))

    assert answer.status == 202, name
    assert answer.json()["enqueued"] == [pr_key(rig.env)]
    assert rig.asgi.paths == [PATH]


@pytest.mark.anyio
async def test_a_body_over_the_off_loop_size_goes_through_uvicorn(rig: Rig) -> None:
    body = rig.body(padding="x" * OFF_LOOP_BYTES)

    [answer] = await exchange(rig, request(body, "d-large"))

    assert answer.status == 202
    assert rig.asgi.paths == [PATH]


@pytest.mark.anyio
async def test_other_routes_are_served_by_the_app(rig: Rig) -> None:
    reader, writer = await rig.connect()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: service\r\n\r\n")
    with anyio.fail_after(10):
        answer = await read_answer(reader)
    writer.close()

    assert answer.status in (200, 503) and "checks" in answer.json()
    assert rig.asgi.paths == ["/healthz"]


# -- one connection -------------------------------------------------------------------------


@dataclass
class Held:
    """The receiver's commits held until ``release`` is set; ``submitted`` once one waits."""

    submitted: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)


def hold_commits(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> Held:
    receiver = rig.env.app.receiver
    original = receiver.submit
    held = Held()

    def submit(received: Received) -> asyncio.Future[Result]:
        async def later() -> Result:
            await held.release.wait()
            return await original(received)
        held.submitted.set()
        return asyncio.ensure_future(later())

    monkeypatch.setattr(receiver, "submit", submit)
    return held


def connections(rig: Rig) -> list[Any]:
    return list(rig.served.server.server_state.connections)


@pytest.mark.anyio
async def test_pipelined_requests_are_answered_in_order(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    held = hold_commits(rig, monkeypatch)
    reader, writer = await rig.connect()
    writer.write(request(rig.body(), "p-1") + request(rig.body(), "p-2")
                 + b"GET /healthz HTTP/1.1\r\nHost: service\r\n\r\n"
                 + request(rig.body(), "p-3"))
    with anyio.fail_after(10):
        await held.submitted.wait()
        # p-1 is on the fast path, its answer owed: what follows waits in uvicorn's queue.
        while not any(c.pipeline for c in connections(rig)):
            await asyncio.sleep(0.01)
        held.release.set()
        answers = [await read_answer(reader) for _ in range(4)]
    writer.close()

    assert [a.status for a in answers[:2]] == [202, 202]
    assert answers[0].json()["delivery"] == "p-1" and answers[1].json()["delivery"] == "p-2"
    assert "checks" in answers[2].json()
    assert answers[3].status == 202 and answers[3].json()["delivery"] == "p-3"
    assert rig.asgi.paths[:2] == [PATH, "/healthz"]  # p-2 and the GET went through uvicorn


@pytest.mark.anyio
async def test_a_connection_is_kept_alive_until_the_client_closes_it(rig: Rig) -> None:
    reader, writer = await rig.connect()
    with anyio.fail_after(10):
        for n in range(3):
            writer.write(request(rig.body(), f"k-{n}"))
            assert (await read_answer(reader)).status == 202
        writer.write(request(rig.body(), "k-last", headers=("Connection: close",)))
        last = await read_answer(reader)
        assert await reader.read() == b""  # the server closed it
    writer.close()

    assert last.status == 202 and last.headers["connection"] == "close"
    assert rig.asgi.paths == []
    assert len(rig.env.rows("deliveries")) == 4


# -- endings --------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_delivery_whose_client_left_is_still_recorded(rig: Rig) -> None:
    _, writer = await rig.connect()
    writer.write(request(rig.body(), "d-gone"))
    await writer.drain()
    writer.close()

    with anyio.fail_after(10):
        while rig.env.delivery("d-gone") is None:
            await asyncio.sleep(0.01)
    assert [a.status for a in await exchange(rig, request(rig.body(), "d-next"))] == [202]


@pytest.mark.anyio
async def test_a_delivery_cut_off_mid_body_is_not_recorded(rig: Rig) -> None:
    whole = request(rig.body(), "d-cut")
    _, writer = await rig.connect()
    writer.write(whole[: len(whole) - 100])
    await writer.drain()
    writer.close()

    [after] = await exchange(rig, request(rig.body(), "d-after"))

    assert after.status == 202
    assert [row[0] for row in rig.env.rows("deliveries")] == ["d-after"]


@pytest.mark.anyio
async def test_a_shutdown_lets_the_delivery_in_flight_answer_then_closes(
        rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    held = hold_commits(rig, monkeypatch)
    reader, writer = await rig.connect()
    writer.write(request(rig.body(), "d-flight"))
    with anyio.fail_after(10):
        await held.submitted.wait()
        rig.served.server.should_exit = True
        # uvicorn asks each connection to finish: the one in flight is to close after it.
        while any(getattr(c.cycle, "keep_alive", False) for c in connections(rig)):
            await asyncio.sleep(0.01)
        held.release.set()
        answer = await read_answer(reader)
        assert await reader.read() == b""
        await rig.served.task
    writer.close()

    assert answer.status == 202 and answer.headers["connection"] == "close"
    assert rig.env.delivery("d-flight") is not None


@pytest.mark.anyio
async def test_a_bug_is_a_500_and_the_connection_serves_on(
        rig: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def broken(headers: object, body: bytes) -> object:
        raise RuntimeError("a bug")

    reader, writer = await rig.connect()
    with anyio.fail_after(10):
        monkeypatch.setattr(rig.env.app.receiver, "check", broken)
        writer.write(request(rig.body(), "d-bug"))
        failed = await read_answer(reader)
        monkeypatch.undo()
        writer.write(request(rig.body(), "d-fine"))
        fine = await read_answer(reader)
    writer.close()

    assert (failed.status, failed.json()) == (500, {"error": "internal error"})
    assert fine.status == 202
    assert any(r.getMessage() == "webhook receiver failed" and r.levelno == logging.ERROR
               for r in caplog.records)
