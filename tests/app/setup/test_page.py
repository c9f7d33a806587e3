"""The setup page a first run serves: nothing starts without the console's key, one App
at most, health and webhooks answer "registration needed" meanwhile, and the pages forbid
framing, referrers and forms posted from elsewhere."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.app.setup.flow import KEY, Flow, flow

__all__ = ["flow"]  # the fixture


@pytest.mark.anyio
async def test_without_the_console_key_nothing_can_be_started(flow: Flow) -> None:
    for params in ({}, {"key": "guess"}, {"key": KEY + "x"}):
        page = await flow.client.get("/", params=params)
        assert page.status_code == 403
        assert "name=org" not in page.text and "link" in page.text
    response = await flow.client.post("/setup/register", data={"owner": "user"})
    assert response.status_code == 403
    response = await flow.client.post("/setup/register", content=b"key=" + KEY.encode(),
                                      headers={"content-type": "text/plain"})
    assert response.status_code == 400
    big = await flow.client.post("/setup/register", data={"key": KEY, "pad": "x" * 20000})
    assert big.status_code == 400


@pytest.mark.anyio
async def test_after_registration_the_page_refuses_to_start_another(flow: Flow) -> None:
    action, manifest = await flow.start()
    second_action, second_manifest = await flow.start()
    [state] = parse_qs(urlsplit(action).query)["state"]
    [second] = parse_qs(urlsplit(second_action).query)["state"]
    ok = await flow.client.get("/setup/callback", params={
        "code": flow.github_creates(manifest), "state": state})
    assert ok.status_code == 200
    response = await flow.client.get("/setup/callback", params={
        "code": flow.github_creates(second_manifest), "state": second})
    assert response.status_code == 409
    response = await flow.client.post("/setup/register", data={"key": KEY, "owner": "user"})
    assert response.status_code == 409
    assert len(flow.announced) == 1


@pytest.mark.anyio
async def test_health_and_webhooks_wait_for_registration(flow: Flow) -> None:
    health = await flow.client.get("/healthz")
    assert health.status_code == 503
    assert health.json()["status"] == "registration_needed"
    hook = await flow.client.post("/webhook", content=b"{}")
    assert hook.status_code == 503 and hook.headers["retry-after"] == "60"


@pytest.mark.anyio
async def test_pages_forbid_framing_referrers_and_foreign_forms(flow: Flow) -> None:
    page = await flow.client.get("/", params={"key": KEY})
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'none'" in csp
    assert "form-action 'self'" in csp
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"
    to_github = await flow.client.post("/setup/register", data={"key": KEY, "owner": "user"})
    csp = to_github.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp)[1]  # type: ignore[index]
    assert f"<script nonce='{nonce}'>" in to_github.text
    assert "form-action 'self' https://github.com;" in csp
