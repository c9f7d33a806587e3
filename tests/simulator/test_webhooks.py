"""The simulator's webhook sender and payloads, git repositories, JSON seeding and the
App-manifest flow."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import jwt as pyjwt
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from tests.kit.paths import CHECKOUT
from tests.simulator import GitRepo, WebhookSender, load_world, open_pull, push_to_pull, sign
from tests.simulator.harness import (
    REPO,
    SAMPLE_DIFF,
    Harness,
    app_key_pair,
    auth,
    bearer,
)
from tests.simulator_fixtures import harness_sim

__all__ = ["harness_sim"]  # the fixtures


class Receiver:
    """A stand-in webhook endpoint that keeps what it was sent."""

    def __init__(self) -> None:
        self.received: list[tuple[dict[str, str], bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        self.received.append((dict(request.headers), await request.body()))
        await Response(status_code=202)(scope, receive, send)



@pytest.fixture
async def hook() -> AsyncIterator[tuple[Receiver, httpx.AsyncClient]]:
    receiver = Receiver()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=receiver),
                                 base_url="http://service") as client:
        yield receiver, client


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    sha256 = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    sha1 = "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()
    return hmac.compare_digest(sha256, headers["x-hub-signature-256"]) and hmac.compare_digest(
        sha1, headers["x-hub-signature"])


# -- signing and headers ---------------------------------------------------------------------
def test_sign_matches_githubs_published_vector() -> None:
    sha256, _ = sign("It's a Secret to Everybody", b"Hello, World!")
    assert sha256 == "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


@pytest.mark.anyio
async def test_json_delivery_headers_and_signatures(
        sim: Harness, hook: tuple[Receiver, httpx.AsyncClient]) -> None:
    receiver, client = hook
    secret = sim.app.webhook_secret
    assert secret is not None
    sender = WebhookSender(client, url="/github/webhook", secret=secret, app_id=sim.app.id)
    response = await sender.send("pull_request", sim.world.payloads.pull_request(
        "opened", sim.pull))
    assert response.status_code == 202
    headers, body = receiver.received[0]
    assert verify(secret, headers, body)
    assert not verify("another secret", headers, body)
    assert headers["x-github-event"] == "pull_request"
    assert len(headers["x-github-delivery"]) == 36
    assert headers["x-github-hook-installation-target-id"] == str(sim.app.id)
    assert headers["x-github-hook-installation-target-type"] == "integration"
    assert headers["x-github-hook-id"].isdigit()
    assert headers["user-agent"].startswith("GitHub-Hookshot/")
    assert headers["content-type"] == "application/json"
    payload = json.loads(body)
    assert payload["action"] == "opened" and payload["number"] == 1
    assert payload["pull_request"]["head"]["sha"] == "b" * 40
    assert payload["pull_request"]["draft"] is False
    assert payload["installation"]["id"] == sim.installation.id
    assert payload["repository"]["full_name"] == REPO
    assert payload["organization"]["login"] == "acme"
    assert payload["sender"]["login"] == "alice"


@pytest.mark.anyio
async def test_tampered_body_fails_verification(
        sim: Harness, hook: tuple[Receiver, httpx.AsyncClient]) -> None:
    _, client = hook
    sender = WebhookSender(client, url="/hook", secret="s3cret", app_id=sim.app.id)
    delivery = sender.build("ping", {"zen": "x"})
    assert verify("s3cret", {k.lower(): v for k, v in delivery.headers.items()}, delivery.body)
    tampered = delivery.body.replace(b"x", b"y")
    assert not verify("s3cret", {k.lower(): v for k, v in delivery.headers.items()}, tampered)


@pytest.mark.anyio
async def test_form_encoded_delivery(sim: Harness,
                                     hook: tuple[Receiver, httpx.AsyncClient]) -> None:
    receiver, client = hook
    sender = WebhookSender(client, url="/hook", secret="s3cret", app_id=sim.app.id,
                           content_type="form")
    await sender.ping(sim.world)
    headers, body = receiver.received[0]
    assert headers["content-type"] == "application/x-www-form-urlencoded"
    assert verify("s3cret", headers, body)
    payload = json.loads(parse_qs(body.decode())["payload"][0])
    assert payload["hook"]["app_id"] == sim.app.id and payload["hook_id"] == sender.hook_id
    assert payload["zen"]


@pytest.mark.anyio
async def test_no_secret_means_no_signature(sim: Harness,
                                            hook: tuple[Receiver, httpx.AsyncClient]) -> None:
    receiver, client = hook
    await WebhookSender(client, url="/hook", secret=None, app_id=1).send("ping", {"zen": "z"})
    headers, _ = receiver.received[0]
    assert "x-hub-signature-256" not in headers and "x-hub-signature" not in headers


# -- payload shapes --------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_issue_comment_payload_on_pr_and_on_plain_issue(sim: Harness) -> None:
    world = sim.world
    world.add_issue(REPO, number=2, title="A bug", user="dave")
    on_pr = world.add_issue_comment(REPO, 1, user="alice", body="/review", emit=True)
    on_issue = world.add_issue_comment(REPO, 2, user="dave", body="same here", emit=True)
    pr_payload, issue_payload = (e.payload for e in world.events)
    assert pr_payload["issue"]["pull_request"]["url"].endswith(f"/repos/{REPO}/pulls/1")
    assert "pull_request" not in issue_payload["issue"]
    assert pr_payload["comment"]["id"] == on_pr.id
    assert issue_payload["comment"]["id"] == on_issue.id
    assert pr_payload["comment"]["performed_via_github_app"] is None
    assert pr_payload["sender"]["type"] == "User"


@pytest.mark.anyio
async def test_app_comment_causes_a_bot_issue_comment_webhook(
        sim: Harness, hook: tuple[Receiver, httpx.AsyncClient]) -> None:
    receiver, client = hook
    token = await sim.mint_token()
    created = await sim.client.post(f"/repos/{REPO}/issues/1/comments", headers=auth(token),
                                    json={"body": "I'm on it"})
    sender = WebhookSender(client, url="/hook", secret="s", app_id=sim.app.id)
    responses = await sender.deliver_pending(sim.world)
    assert [r.status_code for r in responses] == [202] and sim.world.events == []
    headers, body = receiver.received[0]
    payload = json.loads(body)
    assert headers["x-github-event"] == "issue_comment" and payload["action"] == "created"
    assert payload["comment"] == created.json()  # REST and webhook shapes agree
    assert payload["sender"]["login"] == "pr-reviewer[bot]" and payload["sender"]["type"] == "Bot"
    assert payload["comment"]["performed_via_github_app"]["id"] == sim.app.id
    # A redelivery carries the same X-GitHub-Delivery.
    first = sender.deliveries[0]
    await sender.post(sender.build(first.event, json.loads(first.body),
                                   delivery_id=first.delivery_id))
    assert receiver.received[1][0]["x-github-delivery"] == headers["x-github-delivery"]


@pytest.mark.anyio
async def test_pull_request_lifecycle_events(sim: Harness) -> None:
    world = sim.world
    world.set_draft(REPO, 1, True)
    world.set_draft(REPO, 1, False)
    world.push(REPO, 1, head_sha="c" * 40, diff=SAMPLE_DIFF)
    world.close(REPO, 1, merged=True, sender="maintainer")
    actions = [e.payload["action"] for e in world.events]
    assert actions == ["converted_to_draft", "ready_for_review", "synchronize", "closed"]
    sync = world.events[2].payload
    assert (sync["before"], sync["after"]) == ("b" * 40, "c" * 40)
    assert sync["pull_request"]["head"]["sha"] == "c" * 40
    closed = world.events[3].payload
    assert closed["pull_request"]["merged"] is True
    assert closed["sender"]["login"] == "maintainer"


@pytest.mark.anyio
async def test_installation_payloads(sim: Harness) -> None:
    world = sim.world
    created = world.payloads.installation("created", sim.installation)
    assert created["installation"]["id"] == sim.installation.id
    assert created["installation"]["app_id"] == sim.app.id
    assert {r["full_name"] for r in created["repositories"]} == {REPO, "acme/gadgets"}
    added_repo = world.add_repository("acme/new-thing")
    sim.installation.repository_ids.add(added_repo.id)
    added = world.payloads.installation_repositories("added", sim.installation,
                                                     added=[added_repo])
    assert added["repositories_added"] == [{"id": added_repo.id,
                                            "node_id": added["repositories_added"][0]["node_id"],
                                            "name": "new-thing", "full_name": "acme/new-thing",
                                            "private": True}]
    assert added["repositories_removed"] == [] and added["repository_selection"] == "selected"


# -- git -----------------------------------------------------------------------------------------
def _git(*args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout


@pytest.mark.anyio
async def test_git_backed_pull_request(sim: Harness, tmp_path: Path) -> None:
    git = GitRepo.create(tmp_path / "gadgets.git")
    base = git.commit({"lib.py": "def f():\n    return 1\n", "README.md": "gadgets\n"},
                      branch="main", message="base")
    head = git.commit({"lib.py": "def f():\n    return 2\n", "new.py": "x = 1\n"}, parent=base,
                      branch="feature", message="change")
    pr = open_pull(sim.world, "acme/gadgets", git, base_ref="main", head_ref="feature",
                   title="Change f", user="erin")
    assert (pr.head.base_sha, pr.head.head_sha) == (base, head)
    assert {f.path for f in pr.head.files} == {"lib.py", "new.py"}
    token = await sim.mint_token()
    diff = await sim.client.get(f"/repos/acme/gadgets/pulls/{pr.number}", headers={
        **auth(token), "Accept": "application/vnd.github.diff"})
    assert diff.text == git.diff(base, head) and "+    return 2" in diff.text
    clone_url = (await sim.client.get(f"/repos/acme/gadgets/pulls/{pr.number}",
                                      headers=auth(token))).json()["base"]["repo"]["clone_url"]
    assert clone_url == git.url
    checkout = tmp_path / "checkout"
    _git("clone", "-q", clone_url, str(checkout))
    _git("fetch", "-q", "origin", f"pull/{pr.number}/head", cwd=checkout)
    _git("checkout", "-q", "FETCH_HEAD", cwd=checkout)
    assert (checkout / "lib.py").read_text() == "def f():\n    return 2\n"

    pushed = push_to_pull(sim.world, "acme/gadgets", pr.number, git, {"more.py": "y = 2\n"})
    assert git.ref(f"refs/pull/{pr.number}/head") == pushed.head_sha
    assert pushed.commits == 2 and {f.path for f in pushed.files} >= {"more.py", "lib.py"}
    sync = sim.world.events[-1].payload
    assert (sync["action"], sync["before"], sync["after"]) == ("synchronize", head,
                                                              pushed.head_sha)
    forced = push_to_pull(sim.world, "acme/gadgets", pr.number, git, {"only.py": "z\n"},
                          force=True)
    assert {f.path for f in forced.files} == {"only.py"} and forced.commits == 1
    assert git.ref("refs/heads/feature") == forced.head_sha


# -- seeding ---------------------------------------------------------------------------------
def test_seed_from_json(tmp_path: Path) -> None:
    _, public_pem = app_key_pair()
    (tmp_path / "app.pub").write_bytes(public_pem)
    (tmp_path / "pr1.diff").write_text(SAMPLE_DIFF)
    state = {
        "settings": {"rate_limit": 100},
        "app": {"id": 5, "slug": "seeded", "public_key_file": "app.pub",
                "webhook_secret": "hook-secret"},
        "users": [{"login": "alice", "id": 11, "association": "MEMBER"}],
        "repositories": [{"full_name": "acme/widgets", "id": 900}],
        "installations": [{"id": 31, "account": "acme", "repositories": None}],
        "issues": [{"repo": "acme/widgets", "number": 2, "title": "bug", "user": "bob"}],
        "pull_requests": [{"repo": "acme/widgets", "number": 1, "title": "t", "user": "alice",
                           "head": {"sha": "b" * 40, "ref": "feat"}, "base": {"sha": "a" * 40},
                           "diff_file": "pr1.diff", "draft": True}],
        "issue_comments": [{"repo": "acme/widgets", "number": 1, "user": "bob", "body": "hi",
                            "created_at": "2026-01-02T03:04:05Z"}],
        "review_comments": [{"repo": "acme/widgets", "number": 1, "user": "bob",
                             "body": "nit", "path": "src/app.py", "line": 3}],
        "manifest_codes": [{"code": "abc123", "manifest": {"url": "https://example.com"}}],
    }
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    world = load_world(path)
    assert world.settings.rate_limit == 100 and world.app.slug == "seeded"
    assert world.installations[31].repository_selection == "all"
    assert world.installation_for(world.repo("acme/widgets")) is world.installations[31]
    pr = world.pull("acme/widgets", 1)
    assert pr.draft and pr.head_ref == "feat" and len(pr.head.files) == 2
    assert world.users["alice"].association == "MEMBER"
    assert len(world.issue_comments) == 1 and len(world.review_comments) == 1
    assert "abc123" in world.manifest_codes
    path.write_text(json.dumps({**state, "pull_request": []}))
    with pytest.raises(ValueError, match="unknown top-level keys"):
        load_world(path)


# -- the manifest flow -------------------------------------------------------------------------
@pytest.mark.anyio
async def test_manifest_conversion(sim: Harness) -> None:
    manifest = {"name": "My Reviewer", "url": "https://example.com",
                "hook_attributes": {"url": "https://example.com/hook"},
                "default_permissions": {"pull_requests": "write", "issues": "write"},
                "default_events": ["pull_request", "issue_comment"]}
    code = sim.world.create_manifest_code(manifest)
    converted = await sim.client.post(f"/app-manifests/{code}/conversions")
    assert converted.status_code == 201
    app = converted.json()
    for field in ("id", "slug", "pem", "webhook_secret", "client_id", "client_secret",
                  "html_url"):
        assert app[field], field
    assert app["slug"] == "my-reviewer" and app["events"] == ["pull_request", "issue_comment"]
    now = int(sim.world.clock.timestamp())
    new_jwt = pyjwt.encode({"iat": now - 60, "exp": now + 540, "iss": str(app["id"])},
                           app["pem"], algorithm="RS256")
    me = await sim.client.get("/app", headers=bearer(new_jwt))
    assert me.json()["slug"] == "my-reviewer"
    assert (await sim.client.post(f"/app-manifests/{code}/conversions")).status_code == 404
    late = sim.world.create_manifest_code(manifest)
    sim.world.clock.advance(3601)
    assert (await sim.client.post(f"/app-manifests/{late}/conversions")).status_code == 404
    with pytest.raises(ValueError, match="not supported by permissions: issue_comment"):
        sim.world.create_manifest_code({**manifest, "default_permissions": {
            "pull_requests": "write"}})


@pytest.mark.anyio
async def test_an_event_emitted_while_deliveries_are_in_flight_waits_for_the_next(
        sim: Harness) -> None:
    """``POST /_simulator/webhooks/deliver`` sends what is pending; the receiver's own
    answer (here: a comment the App posts while handling the delivery) emits an event
    meanwhile, which must be delivered by the next call, not dropped."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tests.simulator import control

    world = sim.world
    pr = world.add_pull(REPO, title="t", user="alice", head_sha="b" * 40,
                        base_sha="a" * 40, diff="")
    world.events.clear()
    world.add_issue_comment(REPO, pr.number, user="alice", body="first", emit=True)
    seen: list[str] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            seen.append(self.headers["x-github-event"])
            if len(seen) == 1:  # the App answers the first delivery with a comment
                world.add_issue_comment(REPO, pr.number, user="alice", body="second", emit=True)
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        first = await control.handle(world, "POST", "/_simulator/webhooks/deliver",
                                     json.dumps({"url": url, "secret": "s"}).encode())
        second = await control.handle(world, "POST", "/_simulator/webhooks/deliver",
                                      json.dumps({"url": url, "secret": "s"}).encode())
    finally:
        server.shutdown()
        server.server_close()
    assert len(json.loads(first.body)["delivered"]) == 1
    assert len(json.loads(second.body)["delivered"]) == 1
    assert seen == ["issue_comment", "issue_comment"] and world.events == []


def test_the_readme_and_the_module_list_every_control_route() -> None:
    import re
    here = CHECKOUT / "tests" / "simulator"
    source = (here / "control.py").read_text()
    routes = set(re.findall(r'route == \("(GET|POST|DELETE)", "(/[\w/-]+)"\)', source))
    assert ("POST", "/files") in routes and len(routes) > 10
    readme = (here / "README.md").read_text()
    section = readme[readme.index("## Control API"):readme.index("## github.com's pages")]
    docstring = source[:source.index('"""', 3)]
    for method, path in sorted(routes):
        assert re.search(rf"\b{method}\b[^`]*`?[^`]*{re.escape(path)}\b", section) or (
            re.search(rf"{method}(\|\w+)* {re.escape(path)}\b", section)), (method, path)
        assert f"{method}    /_simulator{path}" in docstring or (
            f"{method} /_simulator{path}" in docstring) or re.search(
            rf"{method}\s+/_simulator{re.escape(path)}\b", docstring), (method, path)
    assert "/work/" not in readme  # nothing outside the repository
