"""The registration page end to end, in process, against the simulator's manifest flow.

GET / (with the console's key) → form → POST /setup/register → a page that posts the
manifest to GitHub's "new App" URL with a fresh ``state`` → (the simulator plays GitHub:
``create_manifest_code`` is what its registration form hands the redirect) → GET
/setup/callback?code=…&state=… → the code converted with ``POST /app-manifests/{code}/
conversions``, the key and secret written 0600 in a 0700 directory, the config updated
with the rest of it kept, and ``load_config`` succeeding on the result.
"""

from __future__ import annotations

import stat
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from service.config.strict_yaml import load_config
from tests.app.setup.flow import CONFIG, KEY, Flow, flow

__all__ = ["flow"]  # the fixture


@pytest.mark.anyio
async def test_register_from_the_page_to_a_config_that_loads(flow: Flow) -> None:
    page = await flow.client.get("/", params={"key": KEY})
    assert page.status_code == 200
    assert "Register the GitHub App" in page.text and "name=org" in page.text
    assert "https://reviews.example.com/webhook" in page.text
    # Relative, so that behind a proxy serving the agent under a path the form stays there.
    assert "<form method=post action='setup/register'>" in page.text

    action, manifest = await flow.start()
    url = urlsplit(action)
    assert (url.scheme, url.netloc, url.path) == ("https", "github.com", "/settings/apps/new")
    [state] = parse_qs(url.query)["state"]
    assert len(state) >= 40
    assert manifest["url"] == "https://reviews.example.com"
    assert manifest["hook_attributes"] == {"url": "https://reviews.example.com/webhook",
                                           "active": True}
    assert manifest["redirect_url"] == "https://reviews.example.com/setup/callback"
    assert manifest["default_events"] == ["pull_request", "issue_comment",
                                          "pull_request_review_comment"]

    code = flow.github_creates(manifest)  # the simulator validates it as GitHub's form does
    done = await flow.client.get("/setup/callback", params={"code": code, "state": state})
    assert done.status_code == 200, done.text

    app = flow.world.apps[max(flow.world.apps)]
    assert flow.world.manifest_codes[code].used
    # The page: what was created and where to install it; never a secret.
    assert f"(id {app.id})" in done.text
    assert f"https://github.com/apps/{app.slug}/installations/new" in done.text
    key_file = flow.config_path.parent / "secrets" / f"github-app-{app.id}.pem"
    secret_file = flow.config_path.parent / "secrets" / f"webhook-secret-{app.id}"
    pem, secret = key_file.read_text(), secret_file.read_text()
    assert secret == app.webhook_secret and pem.startswith("-----BEGIN")
    assert secret not in done.text and "PRIVATE KEY" not in done.text
    # Readable by the service's user alone.
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    assert not [p for p in key_file.parent.iterdir() if p.name.startswith(".")]  # no temp
    # The config names them, and everything the operator wrote is still there.
    text = flow.config_path.read_text()
    assert yaml.safe_load(text)["github"] == {
        "app_id": app.id, "private_key_file": f"secrets/github-app-{app.id}.pem",
        "webhook_secret_file": f"secrets/webhook-secret-{app.id}"}
    assert text.endswith(CONFIG.split("\n", 1)[1])  # every line after the first comment
    assert text.startswith("# The operator's own words")
    config = load_config(flow.config_path, {})
    assert config.github.app_id == app.id
    assert config.github.webhook_secrets[0].reveal() == app.webhook_secret
    assert config.server.public_url == "https://reviews.example.com"
    # The daemon is told, with the loaded config, once the page has been sent.
    [registered] = flow.announced
    assert registered.config == config and registered.slug == app.slug
    # The conversion was one unauthenticated POST to the API.
    [conversion] = flow.world.requests.matching("POST", "/app-manifests/*/conversions")
    assert conversion.path == f"/app-manifests/{code}/conversions"
    assert conversion.credential is None


@pytest.mark.anyio
async def test_an_organisation_registers_under_its_own_settings(flow: Flow) -> None:
    action, _ = await flow.start({"owner": "org", "org": "acme-corp"})
    assert urlsplit(action).path == "/organizations/acme-corp/settings/apps/new"
    for bad in ("", "acme corp", "-acme", "a" * 40, "acme/../x"):
        response = await flow.client.post("/setup/register",
                                          data={"key": KEY, "owner": "org", "org": bad})
        assert response.status_code == 400, bad
        assert "organisation" in response.text


@pytest.mark.anyio
async def test_a_forwarding_webhook_url_can_replace_the_default(flow: Flow) -> None:
    _, manifest = await flow.start({"webhook_url": "https://smee.io/abc123"})
    assert manifest["hook_attributes"]["url"] == "https://smee.io/abc123"
    assert manifest["redirect_url"] == "https://reviews.example.com/setup/callback"
    response = await flow.client.post("/setup/register", data={
        "key": KEY, "owner": "user", "webhook_url": "javascript:alert(1)"})
    assert response.status_code == 400


@pytest.mark.anyio
async def test_a_state_this_server_did_not_issue_never_spends_the_code(flow: Flow) -> None:
    _, manifest = await flow.start()
    code = flow.github_creates(manifest)
    for state in ("", "forged-state"):
        response = await flow.client.get("/setup/callback",
                                         params={"code": code, "state": state})
        assert response.status_code == 400
        assert "not started by this server" in response.text
    assert not flow.world.manifest_codes[code].used
    assert not flow.world.requests.matching("POST", "/app-manifests/*/conversions")
    assert not (flow.config_path.parent / "secrets").exists()
    assert "github" not in yaml.safe_load(flow.config_path.read_text())


@pytest.mark.anyio
async def test_a_state_works_once_and_for_an_hour(flow: Flow) -> None:
    _, manifest = await flow.start()
    action, _ = await flow.start()
    [late_state] = parse_qs(urlsplit(action).query)["state"]
    flow.clock.now += timedelta(hours=1, seconds=1)
    response = await flow.client.get("/setup/callback", params={
        "code": flow.github_creates(manifest), "state": late_state})
    assert response.status_code == 400
    assert "more than an hour old" in response.text


@pytest.mark.anyio
async def test_an_expired_or_used_code_says_start_again(flow: Flow) -> None:
    action, manifest = await flow.start()
    [state] = parse_qs(urlsplit(action).query)["state"]
    code = flow.github_creates(manifest)
    flow.world.manifest_codes[code].used = True  # converted elsewhere, or expired
    response = await flow.client.get("/setup/callback", params={"code": code, "state": state})
    assert response.status_code == 502
    assert "a code works once, within an hour" in response.text
    assert not (flow.config_path.parent / "secrets").exists()
    # The state was spent with it: the same link cannot be replayed.
    again = await flow.client.get("/setup/callback", params={"code": code, "state": state})
    assert again.status_code == 400


@pytest.mark.anyio
async def test_a_conversion_github_cannot_answer_is_reported(flow: Flow) -> None:
    action, manifest = await flow.start()
    [state] = parse_qs(urlsplit(action).query)["state"]
    flow.world.faults.add(method="POST", path_glob="/app-manifests/*", status=500)
    response = await flow.client.get("/setup/callback", params={
        "code": flow.github_creates(manifest), "state": state})
    assert response.status_code == 502
    assert "GitHub answered 500" in response.text
