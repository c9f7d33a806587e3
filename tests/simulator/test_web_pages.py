"""The simulator's github.com pages and install control: registering from a manifest the way
the service's page submits it, installing the new App, and each webhook signed with the
secret of the App it belongs to."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from service.github.webhooks import SignatureError, check_signature
from tests.simulator import SimulatorTransport
from tests.simulator.harness import Harness

MANIFEST = {"name": "Review Bot", "url": "http://127.0.0.1:8080",
            "redirect_url": "http://127.0.0.1:8080/setup/callback",
            "hook_attributes": {"url": "http://127.0.0.1:8080/webhook"},
            "default_permissions": {"pull_requests": "write", "issues": "write"},
            "default_events": ["pull_request", "issue_comment"]}


def client(harness: Harness) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=SimulatorTransport(harness.world),
                             base_url="http://sim")


@pytest.mark.anyio
async def test_the_registration_form_is_answered_with_the_redirect_github_sends() -> None:
    harness = Harness.create()
    async with client(harness) as sim:
        answer = await sim.post("/organizations/acme/settings/apps/new?state=s-1",
                                data={"manifest": json.dumps(MANIFEST)})
        assert answer.status_code == 302
        where = urlsplit(answer.headers["location"])
        assert f"{where.scheme}://{where.netloc}{where.path}" == MANIFEST["redirect_url"]
        query = parse_qs(where.query)
        assert query["state"] == ["s-1"]
        converted = await sim.post(f"/app-manifests/{query['code'][0]}/conversions")
        assert converted.status_code == 201
        assert converted.json()["owner"]["login"] == "acme"  # registered for the org
        broken = await sim.post("/settings/apps/new", data={"manifest": "{"})
        assert broken.status_code == 422
        assert (await sim.get("/settings/apps/new")).status_code == 405


@pytest.mark.anyio
async def test_a_registered_app_is_installed_and_its_webhooks_carry_its_own_secret() -> None:
    harness = Harness.create()
    world = harness.world
    code = world.create_manifest_code(MANIFEST, owner="acme")
    converted = world.convert_manifest(code)
    assert converted is not None
    app, _ = converted
    received: list[tuple[str, bool, bool]] = []

    async def receiver(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        body = await request.body()
        signature = request.headers["x-hub-signature-256"]
        ours = _verifies(body, signature, app.webhook_secret or "")
        seeded = _verifies(body, signature, harness.app.webhook_secret or "")
        received.append((request.headers["x-github-event"], ours, seeded))
        await Response(status_code=202)(scope, receive, send)

    async with client(harness) as sim:
        page = await sim.get(f"/apps/{app.slug}/installations/new")
        assert page.status_code == 200 and "acme/widgets" in page.text
        installed = await sim.post("/_simulator/installations",
                                   json={"repositories": ["acme/widgets"]})  # the newest App
        assert installed.status_code == 201
        assert (installed.json()["app_id"], installed.json()["repositories"]) == (
            app.id, ["acme/widgets"])
        world.add_issue_comment("acme/widgets", 1, user="alice", body="hello", emit=True)
        [event] = [e for e in world.events if e.event == "installation"]
        assert event.installation_id == installed.json()["id"]
        # Deliver them to a receiver of our own through the same transport machinery.
        with pytest.MonkeyPatch.context() as patch:
            original = httpx.AsyncClient

            def routed(**kwargs: object) -> httpx.AsyncClient:
                return original(transport=httpx.ASGITransport(app=receiver),
                                timeout=kwargs.get("timeout", 10.0))  # type: ignore[arg-type]

            patch.setattr("tests.simulator.control.httpx.AsyncClient", routed)
            sent = await sim.post("/_simulator/webhooks/deliver",
                                  json={"url": "http://hook/webhook", "app_id": app.id})
        assert [d["event"] for d in sent.json()["delivered"]] == ["installation"]
        assert received == [("installation", True, False)]
        assert [e.event for e in world.events] == ["issue_comment"]  # the seeded App's, kept


def _verifies(body: bytes, signature: str, secret: str) -> bool:
    try:
        check_signature(body, signature, [secret])
    except SignatureError:
        return False
    return True
