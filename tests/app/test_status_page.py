"""``GET /status``: the page for people — behind the admin token (Basic, as a browser
sends it, or Bearer), a strict CSP whose hash matches the one stylesheet, every number in
a ``<data>`` element, and whatever came from GitHub escaped."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import timedelta
from pathlib import Path

import pytest

from service.intake.recovery.reader import CURSOR
from service.storage import redeliveries, repository_polls
from service.storage.watermarks import Watermarks
from tests.webhook_env import NOW, Env, open_env


@pytest.fixture(name="env")
async def env_fixture(tmp_path: Path):  # type: ignore[no-untyped-def]
    # The admin routes opened: these tests are about what they show (the token's own
    # tests are below).
    async with open_env(tmp_path, server={"admin": "open"}) as env:
        yield env


def basic(password: str, user: str = "ops") -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.mark.anyio
async def test_the_page_shows_the_budget_the_queue_and_the_poller(env: Env) -> None:
    pull = env.world.pull("acme/widgets", 1)
    await env.sender.send("pull_request", env.world.payloads.pull_request("opened", pull))
    with env.store.transaction() as tx:
        repository_polls.record(tx, [("acme/widgets", None),
                                     ("acme/gadgets", "403 <script>alert(1)</script>")], NOW)
    response = await env.client.get("/status")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    budget = (await env.client.get("/budget")).json()
    for window in budget["windows"]:
        section = page.split(f'id="window-{window["name"]}"', 1)[1].split("</div>", 1)[0]
        values = re.findall(r'<span class="(spent|reserved|limit)"><data value="(\d+)">', section)
        assert dict(values) == {"spent": str(window["spent"]),
                                "reserved": str(window["reserved"]),
                                "limit": str(window["limit"])}
    assert f'<strong id="rung">{budget["mode"]}</strong>' in page
    assert '<span id="queue-pending">pending <data value="1">' in page
    assert 'href="https://github.com/acme/widgets/pull/1"' in page
    assert "next in line" in page
    assert "<script>" not in page and "403 &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "acme/gadgets" in page and '<span class="ok">ok</span>' in page
    assert "Delivery log: not read yet." in page


@pytest.mark.anyio
async def test_the_page_says_how_far_the_delivery_log_is_read(env: Env) -> None:
    with env.store.transaction() as tx:
        redeliveries.requested(tx, "guid-1", 7, NOW)
    Watermarks(env.store).advance(CURSOR, NOW - timedelta(minutes=3))
    page = (await env.client.get("/status")).text
    line = page.split("Delivery log:", 1)[1].split("</p>", 1)[0]
    assert f'datetime="{(NOW - timedelta(minutes=3)).isoformat(timespec="seconds")}"' in line
    assert 'awaited' in line and '<data value="1">' in line


@pytest.mark.anyio
async def test_the_csp_allows_exactly_the_pages_stylesheet_and_nothing_else(env: Env) -> None:
    response = await env.client.get("/status")
    csp = response.headers["content-security-policy"]
    [style] = re.findall(r"<style>(.*?)</style>", response.text, flags=re.S)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "script" not in csp
    assert "<script" not in response.text and "http://" not in response.text.split("</style>")[0]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["cache-control"] == "no-store"
    assert 'name="viewport"' in response.text  # usable on a phone


@pytest.mark.anyio
async def test_the_page_needs_the_admin_token_as_a_browser_sends_it(tmp_path: Path) -> None:
    (tmp_path / "admin").write_text("s3cret-admin\n")
    async with open_env(tmp_path, server={"admin_token_file": "admin"}) as env:
        refused = await env.client.get("/status")
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith('Basic realm="pr-review-agent"')
        assert (await env.client.get("/status", headers=basic("wrong"))).status_code == 401
        assert (await env.client.get("/status", headers={
            "Authorization": "Basic !!notbase64"})).status_code == 401
        assert (await env.client.get("/status", headers=basic("s3cret-admin"))).status_code \
            == 200
        assert (await env.client.get("/status", headers={
            "Authorization": "Bearer s3cret-admin"})).status_code == 200
        # Basic is for the page a browser opens, not for the JSON routes.
        assert (await env.client.get("/budget", headers=basic("s3cret-admin"))).status_code \
            == 401


@pytest.mark.anyio
async def test_a_store_that_is_down_is_a_503_page(env: Env) -> None:
    env.store.close()
    response = await env.client.get("/status")
    assert response.status_code == 503
    assert response.headers["retry-after"] and "store is unavailable" in response.text


