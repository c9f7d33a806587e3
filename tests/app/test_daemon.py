"""``pr-review-agent serve --role web``: the real process, the roles, the App's identity."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from service.app.daemon import AVAILABLE_ROLES, run
from service.app.serving import listen
from service.cli.main import main
from service.config.strict_yaml import load_config
from tests import payloads as p
from tests.databases import as_url, private_cluster, throwaway_database
from tests.kit.paths import CHECKOUT
from tests.kit.ports import free_port
from tests.kit.processes import ServeProcess
from tests.kit.waiting import wait_for
from tests.simulator import SimulatorTransport, WebhookSender
from tests.simulator.harness import Harness
from tests.webhook_env import PREVIOUS_SECRET, SECRET, write_config

ROOT = CHECKOUT


def wait_for_auth_report(serve: ServeProcess) -> dict[str, Any]:
    """/healthz once the background ``GET /app`` has reported (it fails: GitHub is down)."""
    def reported() -> dict[str, Any] | None:
        body = serve.answers()
        if body is None or body["checks"]["github_auth"]["last_failure_at"] is None:
            return None
        return body
    return wait_for("serve to report GitHub's answer", reported, alive=serve.alive,
                    interval=0.05, on_timeout=serve.text)


def test_every_role_is_available_and_an_unknown_one_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    assert set(AVAILABLE_ROLES) == {"web", "poller", "worker", "all"}
    with pytest.raises(SystemExit) as exited:
        main(["serve", "--config", str(config), "--role", "janitor"])
    assert exited.value.code == 2
    assert "invalid choice: 'janitor'" in capsys.readouterr().err


def test_serve_with_a_broken_config_exits_2(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("github: {}\n")

    assert main(["serve", "--config", str(config), "--role", "web"]) == 2
    assert "github.app_id: required" in capsys.readouterr().err


@pytest.mark.anyio
async def test_the_real_process_receives_a_webhook_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    unreachable = free_port()  # nothing listens there: GitHub is down
    config = write_config(tmp_path, port=port,
                          github={"api_url": f"http://127.0.0.1:{unreachable}"})
    log = tmp_path / "stderr.log"
    url = f"http://127.0.0.1:{port}"
    serve = ServeProcess(config, log, url=url, role="web")
    try:
        health = wait_for_auth_report(serve)
        assert health["status"] == "degraded"  # GitHub auth: GET /app failed
        async with httpx.AsyncClient(base_url=url) as client:
            sender = WebhookSender(client, url="/webhook", secret=SECRET, app_id=4242)
            payload = p.pull_request_event("opened")
            response = await sender.send("pull_request", payload, delivery_id="live-1")
        # An oversized declaration is answered before any body is sent.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"POST /webhook HTTP/1.1\r\nHost: x\r\n"
                        b"Content-Length: 1000000000\r\n\r\n")
            status_line = raw.recv(64).split(b"\r\n", 1)[0]
        serve.signal(signal.SIGTERM)
        code = serve.wait(timeout=20)
    finally:
        serve.close()

    assert response.status_code == 202
    assert response.json()["enqueued"] == [f"pr_opened:Codertocat/Hello-World:2:{p.HEAD_SHA}"]
    assert status_line == b"HTTP/1.1 413 Request Entity Too Large"
    assert code == 0
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("SELECT outcome FROM deliveries WHERE delivery_id = 'live-1'"
                          ).fetchone() == ("enqueued",)
        assert db.execute("SELECT COUNT(*) FROM queue").fetchone() == (1,)
    text = log.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    [delivery] = [line for line in lines if line["message"] == "webhook delivery"]
    assert delivery["delivery_id"] == "live-1" and delivery["repo"] == "Codertocat/Hello-World"
    assert any(line["message"].startswith("cannot learn the App's slug") for line in lines)
    assert SECRET not in text and PREVIOUS_SECRET not in text


@pytest.mark.anyio
async def test_run_learns_the_slug_from_github_and_stops_when_asked(tmp_path: Path) -> None:
    harness = Harness.create()
    config = load_config(write_config(tmp_path), {})
    sock = listen("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop = asyncio.Event()
    result: list[int] = []

    async def serve() -> None:
        result.append(await run(config, "web", stop, transport=SimulatorTransport(harness.world),
                                sockets=[sock]))

    async with anyio.create_task_group() as tg, httpx.AsyncClient(base_url=url) as client:
        tg.start_soon(serve)
        with anyio.fail_after(20):
            while True:  # until the background GET /app has answered
                try:
                    health = (await client.get("/healthz")).json()
                except httpx.TransportError:
                    health = {}
                if health and health["checks"]["github_auth"]["last_success_at"]:
                    break
                await anyio.sleep(0.05)
        # The App's own comment, by its [bot] login: "own_app" only if the slug is known.
        own = p.issue_comment("@claude review", author=p.bot_user(harness.app.slug, 99))
        sender = WebhookSender(client, url="/webhook", secret=SECRET, app_id=harness.app.id)
        response = await sender.send("issue_comment", p.issue_comment_event("created", own))
        stop.set()

    sock.close()
    assert health["status"] == "ok"
    assert health["checks"]["github_auth"]["last_success"] == "app jwt"
    assert response.json()["ignored"] == "own_app"
    assert result == [0]


@pytest.mark.anyio
async def test_a_store_that_cannot_be_opened_ends_run_with_1(tmp_path: Path) -> None:
    config_path = write_config(tmp_path)
    config_path.write_text(config_path.read_text().replace(
        "path: state.db", "path: missing/dir/state.db"))
    config = load_config(config_path, {})
    sock = listen("127.0.0.1", 0)
    try:
        assert await run(config, "web", asyncio.Event(), sockets=[sock]) == 1
    finally:
        sock.close()


@pytest.mark.anyio
async def test_two_replicas_on_one_postgresql_database_record_each_delivery_once(
        tmp_path: Path) -> None:
    """Any replica may receive any delivery: a redelivery to the other one is a duplicate,
    and each delivery and its queue row are recorded once, in the one database."""
    unreachable = free_port()
    with throwaway_database() as conninfo:
        store = {"url": as_url(conninfo)[0]}
        replicas = []
        for name in ("a", "b"):
            port = free_port()
            config = write_config(tmp_path, port=port, store=store, name=f"{name}.yaml",
                                  github={"api_url": f"http://127.0.0.1:{unreachable}"})
            replicas.append((f"http://127.0.0.1:{port}", config, tmp_path / f"{name}.log"))
        serves: list[ServeProcess] = []
        try:
            for url, config, log in replicas:
                serves.append(ServeProcess(config, log, url=url, role="web"))
            for serve in serves:
                assert wait_for_auth_report(serve)["checks"]["store"]["status"] == "ok"
            answers = []
            first = p.pull_request_event("opened")
            second = p.pull_request_event("opened", p.pull_request(7, head_sha="b" * 40))
            for url, event, delivery in ((replicas[0][0], first, "d-1"),
                                         (replicas[1][0], first, "d-1"),
                                         (replicas[1][0], second, "d-2")):
                async with httpx.AsyncClient(base_url=url) as client:
                    sender = WebhookSender(client, url="/webhook", secret=SECRET, app_id=4242)
                    answers.append(await sender.send("pull_request", event,
                                                     delivery_id=delivery))
            for serve in serves:
                serve.signal(signal.SIGTERM)
            codes = [serve.wait(timeout=20) for serve in serves]
        finally:
            for serve in serves:
                serve.close()
        with psycopg.connect(conninfo) as db:
            deliveries = db.execute("SELECT delivery_id, outcome FROM deliveries"
                                    " ORDER BY delivery_id").fetchall()
            queued = db.execute("SELECT COUNT(*) FROM queue").fetchone()
    assert [a.status_code for a in answers] == [202, 200, 202]
    assert answers[1].json() == {"duplicate": True}
    assert codes == [0, 0]
    assert deliveries == [("d-1", "enqueued"), ("d-2", "enqueued")]
    assert queued == (2,)


OUTAGE_BURST = 20
OUTAGE_SPREAD = 0.25  # seconds between two deliveries of the burst
Timed = tuple[httpx.Response, float]


async def outage_burst(base: str, event: dict[str, Any]
                       ) -> tuple[list[Timed], Timed, Timed]:
    """``OUTAGE_BURST`` signed deliveries at once, with a /healthz and a 404 beside them;
    each answer with the seconds it took."""
    async with httpx.AsyncClient(base_url=base, timeout=60,
                                 limits=httpx.Limits(max_connections=64)) as client:
        sender = WebhookSender(client, url="/webhook", secret=SECRET, app_id=4242)

        async def timed(request: Any, after: float = 0.0) -> Timed:
            await asyncio.sleep(after)
            started = time.monotonic()
            response = await request
            return response, time.monotonic() - started

        # Spread over more than one store timeout, as GitHub's deliveries arrive: some
        # queue behind a batch that is already waiting for the store.
        deliveries = [timed(sender.send("pull_request", event, delivery_id=f"d-burst-{n}"),
                            after=n * OUTAGE_SPREAD)
                      for n in range(OUTAGE_BURST)]
        *burst, health, missing = await asyncio.gather(
            *deliveries, timed(client.get("/healthz")), timed(client.get("/no-such-page")))
    return burst, health, missing


@pytest.mark.slow(16)
@pytest.mark.anyio
async def test_a_database_outage_answers_503_loses_nothing_and_recovers(
        tmp_path: Path) -> None:
    """With its PostgreSQL server down, ``serve`` stays up: a delivery is answered 503
    (GitHub shows the failure; redelivery or the poller brings it back), /healthz says the
    store is down; once the server is back the same delivery is enqueued, once."""
    unreachable = free_port()
    with private_cluster() as cluster:
        with psycopg.connect(cluster.conninfo, autocommit=True) as admin:
            admin.execute("CREATE DATABASE outage TEMPLATE template0 ENCODING 'UTF8'")
        url, _ = as_url(make_conninfo(cluster.conninfo, dbname="outage"))
        port = free_port()
        config = write_config(tmp_path, port=port, store={"url": url},
                              github={"api_url": f"http://127.0.0.1:{unreachable}"})
        log = tmp_path / "serve.log"
        base = f"http://127.0.0.1:{port}"
        serve = ServeProcess(config, log, url=base, role="web")
        try:
            assert wait_for_auth_report(serve)["checks"]["store"]["status"] == "ok"
            event = p.pull_request_event("opened")

            async def send() -> httpx.Response:
                async with httpx.AsyncClient(base_url=base, timeout=60) as client:
                    sender = WebhookSender(client, url="/webhook", secret=SECRET, app_id=4242)
                    return await sender.send("pull_request", event, delivery_id="d-out")

            cluster.stop()
            burst, health, missing = await outage_burst(base, event)
            down = await send()
            cluster.start()
            # The pool reconnects on its own (its backoff is bounded): the health check
            # says so first, then the redelivery is taken.
            wait_for("the store to come back", lambda: httpx.get(
                f"{base}/healthz", timeout=60).status_code == 200, alive=serve.alive,
                interval=0.2, on_timeout=serve.text)
            back = await send()
            again = await send()
            assert serve.alive() is None, serve.text()
            serve.signal(signal.SIGTERM)
            code = serve.wait(timeout=20)
        finally:
            serve.close()
        with psycopg.connect(make_conninfo(cluster.conninfo, dbname="outage")) as db:
            deliveries = db.execute("SELECT delivery_id, outcome FROM deliveries").fetchall()
            queued = db.execute("SELECT COUNT(*) FROM queue").fetchone()
    assert down.status_code == 503
    # docs/SCALING.md's promise, for a burst and not only a lone delivery: each delivery
    # is answered 503 within 5 s (GitHub waits 10), /healthz says the store is down as
    # quickly, and a route that needs no store is not held up by the outage at all.
    assert [r.status_code for r, _ in burst] == [503] * OUTAGE_BURST
    slowest = max(seconds for _, seconds in burst)
    assert slowest < 5.0, f"a delivery waited {slowest:.1f} s for its 503"
    (health, health_seconds), (missing, missing_seconds) = health, missing
    assert health.status_code == 503 and health.json()["checks"]["store"]["status"] != "ok"
    assert health_seconds < 5.0, f"/healthz took {health_seconds:.1f} s"
    assert missing.status_code == 404 and missing_seconds < 2.0, missing_seconds
    assert back.status_code == 202 and again.json() == {"duplicate": True}
    assert code == 0
    assert deliveries == [("d-out", "enqueued")] and queued == (1,)
