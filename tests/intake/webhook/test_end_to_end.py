"""The webhook receiver's HTTP contract (DESIGN.md "HTTP"), end to end through the app.

Deliveries are built and signed by the simulator's ``WebhookSender`` (GitHub's headers and
payload shapes) and posted through httpx's ASGI transport to ``create_app``; the store is a
real store, on each backend; and over a real socket to uvicorn configured as ``serve`` runs
it. ``open_env`` is shared with the other ``test_web_*`` modules.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.github.webhooks import sign
from service.storage.sqlite import SqliteStore
from service.storage.times import to_db_time
from tests import payloads as p
from tests.kit.stores import BACKENDS
from tests.simulator import WebhookSender
from tests.simulator.harness import REPO, SAMPLE_DIFF
from tests.webhook_env import (
    LIMIT,
    NOW,
    PREVIOUS_SECRET,
    SECRET,
    Env,
    open_env,
    opened,
    pr_key,
)

# Each backend through httpx's ASGI transport, and SQLite over a real socket to uvicorn as
# ``serve`` runs it.
SERVED = [*((backend, "asgi") for backend in BACKENDS), ("sqlite", "socket")]


@pytest.fixture(params=SERVED, ids="-".join)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    backend, entry = request.param
    async with open_env(tmp_path, backend=backend, entry=entry) as opened:
        yield opened


@pytest.fixture(params=BACKENDS)
async def asgi_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    """For a client still sending when the answer comes: over a socket the server closes
    the connection under it, and what the client reads then is its HTTP library's affair."""
    async with open_env(tmp_path, backend=request.param) as opened:
        yield opened


# -- accepted deliveries --------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_opened_pull_request_is_enqueued_and_the_delivery_recorded(env: Env) -> None:
    response = await env.sender.send("pull_request", opened(env), delivery_id="d-open")

    assert response.status_code == 202
    assert response.json() == {"delivery": "d-open", "enqueued": [pr_key(env)], "ignored": None}
    assert [row.dedupe_key for row in env.queue.rows()] == [pr_key(env)]
    assert env.delivery("d-open") == {
        "delivery_id": "d-open", "event": "pull_request", "action": "opened",
        "installation_id": env.harness.installation.id, "received_at": to_db_time(NOW),
        "outcome": "enqueued",
    }


@pytest.mark.anyio
async def test_a_mention_from_a_member_is_enqueued(env: Env) -> None:
    carol = env.world.add_user("carol", association="MEMBER")
    comment = env.world.add_issue_comment(REPO, 1, user=carol, body="@claude describe please",
                                          emit=True)

    [response] = await env.sender.deliver_pending(env.world)

    key = f"mention:{REPO}:1:{comment.id}"
    assert response.status_code == 202
    assert response.json()["enqueued"] == [key]
    row = env.queue.get(key)
    assert row is not None and row.command == "describe" and row.comment_source == "issue"


@pytest.mark.anyio
async def test_form_encoded_deliveries_are_accepted(env: Env) -> None:
    response = await env.sender.send("pull_request", opened(env), content_type="form")

    assert response.status_code == 202
    assert response.json()["enqueued"] == [pr_key(env)]


@pytest.mark.anyio
async def test_ping_answers_200_and_is_recorded(env: Env) -> None:
    response = await env.sender.ping(env.world)

    assert response.status_code == 200
    assert response.json()["ping"] is True
    [delivery] = env.sender.deliveries
    assert env.delivery(delivery.delivery_id)["outcome"] == "ping"  # type: ignore[index]
    assert env.rows("queue") == []


@pytest.mark.anyio
async def test_an_event_the_agent_does_not_handle_is_202_ignored(env: Env) -> None:
    payload = {"action": "created", "starred_at": "2026-05-04T12:00:00Z",
               "repository": p.repository(), "sender": p.user(),
               "installation": p.installation()}
    response = await env.sender.send("star", payload, delivery_id="d-star")

    assert response.status_code == 202
    assert response.json() == {"delivery": "d-star", "enqueued": [], "ignored": "event:star"}
    assert env.delivery("d-star")["outcome"] == "ignored:event:star"  # type: ignore[index]
    assert env.rows("queue") == []


@pytest.mark.anyio
async def test_a_handled_event_that_asks_for_nothing_says_why(env: Env) -> None:
    env.world.set_draft(REPO, 1, True)
    response = await env.sender.send("pull_request", opened(env))

    assert response.status_code == 202
    assert response.json()["ignored"] == "draft"
    assert env.rows("queue") == []


@pytest.mark.anyio
async def test_a_closed_delivery_changes_nothing_the_poller_records_closes(env: Env) -> None:
    """GitHub signs the body, not the delivery id: a ``closed`` delivery could be a replay
    of a captured one, so it cancels nothing and records no closure (the poller does, from
    GitHub's own listing; a claim re-reads the pull request and settles a closed one at
    zero)."""
    await env.sender.send("pull_request", opened(env))
    env.world.close(REPO, 1, merged=True)
    closed = env.world.payloads.pull_request("closed", env.world.pull(REPO, 1))

    response = await env.sender.send("pull_request", closed, delivery_id="d-close")

    assert response.status_code == 202
    assert response.json() == {"delivery": "d-close", "enqueued": [],
                                "ignored": "closed_by_poller"}
    assert env.queue.get(pr_key(env)).status == "pending"  # type: ignore[union-attr]
    assert env.delivery("d-close")["outcome"] == "ignored:closed_by_poller"  # type: ignore[index]
    assert env.rows("closed_pull_requests") == []


@pytest.mark.anyio
async def test_a_delivery_signed_with_the_previous_secret_is_accepted(env: Env) -> None:
    body = json.dumps(opened(env)).encode()
    response = await env.post("pull_request", body, secret=PREVIOUS_SECRET)

    assert response.status_code == 202


# -- duplicates -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_redelivery_answers_duplicate_and_changes_nothing(env: Env) -> None:
    delivery = env.sender.build("pull_request", opened(env))
    assert (await env.sender.post(delivery)).status_code == 202
    before = (env.rows("queue"), env.rows("deliveries"))
    env.clock.now = NOW + timedelta(hours=1)

    again = await env.sender.post(delivery)
    # Same id, different event entirely: still the delivery already recorded.
    other = await env.sender.send("issue_comment", {"action": "created"},
                                  delivery_id=delivery.delivery_id)

    assert again.status_code == 200 and again.json() == {"duplicate": True}
    assert other.status_code == 200 and other.json() == {"duplicate": True}
    assert (env.rows("queue"), env.rows("deliveries")) == before


@pytest.mark.anyio
async def test_the_same_event_under_a_new_delivery_id_queues_nothing_more(env: Env) -> None:
    await env.sender.send("pull_request", opened(env), delivery_id="first")
    response = await env.sender.send("pull_request", opened(env), delivery_id="second")

    assert response.status_code == 202
    assert response.json()["enqueued"] == [pr_key(env)]  # the row it maps to, already there
    assert len(env.rows("queue")) == 1
    assert env.delivery("second")["outcome"] == "already_queued"  # type: ignore[index]


@pytest.mark.anyio
async def test_concurrent_copies_of_one_delivery_record_it_once(env: Env) -> None:
    delivery = env.sender.build("pull_request", opened(env))
    responses = await asyncio.gather(*(env.sender.post(delivery) for _ in range(5)))

    assert sorted(r.status_code for r in responses) == [200, 200, 200, 200, 202]
    assert len(env.rows("deliveries")) == 1 and len(env.rows("queue")) == 1


# -- refused requests -----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("case", ["wrong_secret", "tampered", "missing", "sha1_only",
                                  "uppercase_hex"])
async def test_a_bad_or_missing_signature_is_401_and_records_nothing(
        env: Env, case: str) -> None:
    body = json.dumps(opened(env)).encode()
    headers: dict[str, str] = {}
    secret: str | None = SECRET
    if case == "wrong_secret":
        secret = "not-the-secret"
    elif case == "tampered":
        headers["X-Hub-Signature-256"] = sign(body, SECRET)
        body = body.replace(b'"opened"', b'"closed"')
    elif case == "missing":
        secret = None
    elif case == "sha1_only":
        secret = None
        headers["X-Hub-Signature"] = "sha1=" + "0" * 40
    else:
        headers["X-Hub-Signature-256"] = sign(body, SECRET).upper().replace("SHA256=", "sha256=")

    response = await env.post("pull_request", body, headers, secret=secret)

    assert response.status_code == 401
    assert env.rows("deliveries") == [] and env.rows("queue") == []


@pytest.mark.anyio
@pytest.mark.parametrize("missing", ["X-GitHub-Event", "X-GitHub-Delivery"])
async def test_a_signed_request_without_github_headers_is_400(env: Env, missing: str) -> None:
    body = json.dumps(opened(env)).encode()
    response = await env.post("pull_request", body, {missing: ""})

    assert response.status_code == 400
    assert missing in response.json()["error"]
    assert env.rows("deliveries") == []


@pytest.mark.anyio
@pytest.mark.parametrize(("body", "content_type"), [
    (b"{not json", "application/json"),
    (b"[1, 2, 3]", "application/json"),
    (b"\xff\xfe", "application/json"),
    (b'{"a": NaN}', "application/json"),
    (b"other=1", "application/x-www-form-urlencoded"),
    (b"payload=%7Bbroken", "application/x-www-form-urlencoded"),
    (b"{}", "text/plain"),
])
async def test_an_unparseable_signed_body_is_400(env: Env, body: bytes,
                                                 content_type: str) -> None:
    response = await env.post("pull_request", body, content_type=content_type)

    assert response.status_code == 400
    assert response.json()["error"].startswith("unparseable body")
    assert env.rows("deliveries") == []


class CountingBody:
    """A request body produced chunk by chunk, counting what the server pulled."""

    def __init__(self, chunks: int, size: int = 16 * 1024) -> None:
        self.chunks, self.size, self.read = chunks, size, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.chunks):
            self.read += self.size
            yield b"x" * self.size


@pytest.mark.anyio
async def test_a_declared_oversized_body_is_413_before_any_of_it_is_read(asgi_env: Env) -> None:
    body = CountingBody(chunks=1000)  # 16 MB on offer
    response = await asgi_env.client.post(
        "/webhook", content=body, headers={
            "Content-Length": str(body.chunks * body.size), "X-GitHub-Event": "push",
            "X-GitHub-Delivery": "big", "X-Hub-Signature-256": "sha256=" + "0" * 64})

    assert response.status_code == 413
    assert body.read == 0


@pytest.mark.anyio
async def test_a_chunked_oversized_body_is_413_once_past_the_limit(asgi_env: Env) -> None:
    body = CountingBody(chunks=1000)
    response = await asgi_env.client.post(
        "/webhook", content=body, headers={"X-GitHub-Event": "push",
                                           "X-GitHub-Delivery": "big"})

    assert response.status_code == 413
    assert LIMIT < body.read <= LIMIT + body.size  # stopped one chunk past the limit
    assert asgi_env.rows("deliveries") == []


@pytest.mark.anyio
async def test_a_body_exactly_at_the_limit_is_read(env: Env) -> None:
    payload = {**opened(env), "padding": ""}
    size = len(json.dumps(payload).encode())
    payload["padding"] = "x" * (LIMIT - size)
    body = json.dumps(payload).encode()
    assert len(body) == LIMIT

    assert (await env.post("pull_request", body)).status_code == 202


# -- the store ------------------------------------------------------------------------------

LOCK_HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
db.execute("ROLLBACK")
db.close()
"""


@pytest.mark.anyio
async def test_a_store_locked_by_another_process_is_503_then_recovers(tmp_path: Path) -> None:
    async with open_env(tmp_path, busy_timeout=0.2) as env:
        delivery = env.sender.build("pull_request", opened(env))
        with subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, env.store.path],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
            assert holder.stdout is not None and holder.stdin is not None
            assert holder.stdout.readline().strip() == "locked"
            refused = await env.sender.post(delivery)
            holder.stdin.close()
            assert holder.wait(timeout=10) == 0

        assert refused.status_code == 503
        assert refused.headers["retry-after"]
        # Nothing was recorded, so GitHub's redelivery is processed in full.
        retried = await env.sender.post(delivery)
        assert retried.status_code == 202
        assert retried.json()["enqueued"] == [pr_key(env)]


@pytest.mark.anyio
async def test_a_closed_store_is_503(env: Env) -> None:
    env.store.close()
    response = await env.sender.send("pull_request", opened(env))

    assert response.status_code == 503


def add_failure(env: Env, table: str, when: str = "TRUE") -> None:
    """Make every INSERT into ``table`` (matching ``when``) fail, as a crash would."""
    if isinstance(env.store, SqliteStore):
        with sqlite3.connect(env.store.path) as db:
            db.execute(f"CREATE TRIGGER fail_{table} AFTER INSERT ON {table} WHEN {when}"
                       " BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
        return
    with env.store.transaction() as tx:
        tx.execute(f"CREATE FUNCTION fail_{table}() RETURNS trigger LANGUAGE plpgsql AS $$"
                   " BEGIN RAISE EXCEPTION 'injected failure'; END $$")
        tx.execute(f"CREATE TRIGGER fail_{table} AFTER INSERT ON {table} FOR EACH ROW"
                   f" WHEN ({when}) EXECUTE FUNCTION fail_{table}()")


def remove_failure(env: Env, table: str) -> None:
    if isinstance(env.store, SqliteStore):
        with sqlite3.connect(env.store.path) as db:
            db.execute(f"DROP TRIGGER fail_{table}")
        return
    with env.store.transaction() as tx:
        tx.execute(f"DROP TRIGGER fail_{table} ON {table}")
        tx.execute(f"DROP FUNCTION fail_{table}()")


@pytest.mark.anyio
@pytest.mark.parametrize("table", ["deliveries", "queue"])
async def test_delivery_and_enqueue_commit_together_or_not_at_all(env: Env, table: str) -> None:
    # "deliveries": the failure comes after the enqueue, at the delivery's own insert;
    # "queue": it comes at the enqueue. Either way neither row may survive.
    add_failure(env, table)
    delivery = env.sender.build("pull_request", opened(env))

    try:
        failed = await env.sender.post(delivery)
    finally:
        remove_failure(env, table)

    assert failed.status_code == 503
    assert env.rows("deliveries") == [] and env.rows("queue") == []
    assert (await env.sender.post(delivery)).status_code == 202
    assert len(env.rows("deliveries")) == 1 and len(env.rows("queue")) == 1


@pytest.mark.anyio
async def test_one_failing_delivery_does_not_fail_those_batched_with_it(env: Env) -> None:
    numbers = []
    for _ in range(5):
        pr = env.world.add_pull(REPO, title="t", user="alice", base_sha="a" * 40,
                                head_sha=f"{len(numbers) + 1:040x}", diff=SAMPLE_DIFF)
        numbers.append(pr.number)
    add_failure(env, "deliveries", "NEW.delivery_id = 'bad'")
    ids = ["bad" if i == 2 else f"ok-{i}" for i in range(5)]

    try:
        responses = await asyncio.gather(*(
            env.sender.send("pull_request", opened(env, n), delivery_id=i)
            for n, i in zip(numbers, ids, strict=True)))
    finally:
        remove_failure(env, "deliveries")

    assert [r.status_code for r in responses] == [202, 202, 503, 202, 202]
    assert sorted(r[0] for r in env.rows("deliveries")) == ["ok-0", "ok-1", "ok-3", "ok-4"]
    assert sorted(row.pr_number for row in env.queue.rows()) == [
        n for i, n in enumerate(numbers) if i != 2]


# -- what is logged ---------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_delivery_is_logged_once_with_its_context_and_no_secret(
        env: Env, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    await env.sender.send("pull_request", opened(env), delivery_id="d-log")
    await env.post("pull_request", b"{}", secret="wrong")

    [line] = [r for r in caplog.records if r.getMessage() == "webhook delivery"]
    fields = {k: getattr(line, k, None) for k in
              ("delivery_id", "event", "action", "repo", "pr", "outcome", "enqueued")}
    assert fields == {"delivery_id": "d-log", "event": "pull_request", "action": "opened",
                      "repo": REPO, "pr": 1, "outcome": "enqueued", "enqueued": [pr_key(env)]}
    everything = " ".join(f"{r.getMessage()} {vars(r)}" for r in caplog.records)
    assert SECRET not in everything and PREVIOUS_SECRET not in everything
    assert any(getattr(r, "reason", None) == "mismatch" for r in caplog.records)


# -- hostile but correctly signed payloads ------------------------------------------------------


@pytest.mark.anyio
async def test_a_lone_surrogate_in_the_action_is_recorded_not_failed(env: Env) -> None:
    payload = opened(env)
    payload["action"] = "\ud800"
    body = json.dumps(payload).encode()  # ASCII JSON carrying the escape "\ud800"

    response = await env.post("pull_request", body, delivery_id="d-sur")

    assert response.status_code == 202
    assert response.json()["ignored"] == "action:?"
    assert env.delivery("d-sur")["action"] == "?"  # type: ignore[index]


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["pull_request.number", "pull_request.user.id"])
async def test_ids_too_large_for_the_store_are_malformed_not_failed(env: Env,
                                                                     where: str) -> None:
    payload = opened(env)
    target = payload
    *parents, last = where.split(".")
    for key in parents:
        target = target[key]
    target[last] = 2**64

    response = await env.sender.send("pull_request", payload)

    assert response.status_code == 202
    assert response.json()["ignored"] == "malformed_payload"
    assert env.rows("queue") == []


@pytest.mark.anyio
async def test_a_huge_installation_id_is_not_stored(env: Env) -> None:
    payload = opened(env)
    payload["installation"]["id"] = 2**64

    response = await env.sender.send("pull_request", payload, delivery_id="d-inst")

    assert response.status_code == 202
    assert env.delivery("d-inst")["installation_id"] is None  # type: ignore[index]


@pytest.mark.anyio
async def test_a_signed_delivery_over_a_socket_is_answered_by_the_fastapi_route(
        tmp_path: Path) -> None:
    """The one way in: uvicorn as ``serve`` runs it, then FastAPI's router, then the
    route's handler. A recording layer around the app (ASGI, what uvicorn calls) sees the
    router fill the scope with the matched route and its endpoint."""
    from fastapi.routing import APIRoute

    from tests.webhook_env import serving

    async with open_env(tmp_path) as env:
        seen: list[dict[str, object]] = []
        app = env.app

        async def recording(scope: Any, receive: Any, send: Any) -> None:
            await app(scope, receive, send)
            seen.append(scope)

        path = env.config.server.webhook_path
        [route] = [r for r in app.routes if getattr(r, "path", None) == path]
        assert isinstance(route, APIRoute) and route.methods == {"POST"}
        async with serving(recording) as served, httpx.AsyncClient(  # type: ignore[arg-type]
                base_url=f"http://127.0.0.1:{served.port}") as client:
            sender = WebhookSender(client, url=env.config.server.webhook_path, secret=SECRET,
                                   app_id=env.harness.app.id)
            answer = await sender.send("pull_request", opened(env))
        assert answer.status_code == 202, answer.text
        [scope] = [s for s in seen if s["type"] == "http"]
        assert scope["route"] is route and scope["endpoint"] is route.endpoint



@pytest.mark.anyio
@pytest.mark.parametrize("delivery_id", ["café", "a b", "d\u00a0x", "-leading", ""])
async def test_a_delivery_id_not_of_githubs_shape_is_refused(
        asgi_env: Env, delivery_id: str) -> None:
    """GitHub's ids are GUIDs: anything that is not plain ASCII of that kind is refused
    rather than stored re-encoded (``café`` came back as ``cafÃ©``)."""
    body = json.dumps(opened(asgi_env)).encode()
    response = await asgi_env.post("pull_request", body, headers={
        "X-GitHub-Delivery": delivery_id.encode("utf-8")},  # type: ignore[dict-item]
        delivery_id="placeholder")
    assert response.status_code == 400
    assert asgi_env.rows("deliveries") == []


@pytest.mark.anyio
async def test_a_trailing_slash_is_never_redirected_to_the_host_a_client_names(
        asgi_env: Env) -> None:
    response = await asgi_env.client.get("/status/", headers={"Host": "evil.example"},
                                         follow_redirects=False)
    assert response.status_code == 404
    assert "location" not in response.headers


@pytest.mark.anyio
async def test_a_signed_body_nested_past_any_reader_is_its_own_400(
        asgi_env: Env, caplog: pytest.LogCaptureFixture) -> None:
    """Nested 30 000 deep: JSON's readers give up; that delivery is 400 ``unparseable``,
    logged once without a traceback, and its neighbours are recorded as usual."""
    caplog.set_level(logging.INFO)
    deep = b'{"action": "opened", "x": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"
    answers = await asyncio.gather(
        asgi_env.sender.send("pull_request", opened(asgi_env), delivery_id="d-before"),
        asgi_env.post("pull_request", deep, delivery_id="d-deep"),
        asgi_env.sender.send("pull_request", opened(asgi_env), delivery_id="d-after"))
    assert [a.status_code for a in answers] == [202, 400, 202]
    assert "unparseable" in answers[1].json()["error"]
    assert all(r.exc_info is None for r in caplog.records)
    assert [r.getMessage() for r in caplog.records].count(
        "webhook refused: unparseable body") == 1
