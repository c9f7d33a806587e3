"""The real GitHub client against the simulator as a separate process over loopback HTTP,
and against an in-process simulator mounted like GitHub Enterprise Server (``/api/v3``);
plus the diff media type and its ``too_large`` refusal.

The standalone test starts ``python -m tests.simulator --port 0 --state seed.json``,
reads the base URL it prints, and points a ``GitHubClient`` with no injected transport
at it: real sockets, real httpx connection handling, real dropped connections.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from service.github.auth import AppJWT, InstallationTokens
from service.github.client import GitHubClient
from service.github.errors import NotAcceptable, ServerError
from service.github.installations import list_installation_repositories
from service.github.webhooks import SignatureError, check_signature, parse_body
from service.model.etags import ETagStore
from tests.github_env import (
    PR1,
    START,
    Env,
    LeakGuard,
    MakeEnv,
    RecordingJWT,
    SimSleep,
    env,
    guard,
    key_lines,
    make_env,
)
from tests.kit.paths import CHECKOUT
from tests.kit.processes import SimulatorProcess
from tests.simulator import Settings, SimClock, SimulatorTransport, WebhookSender
from tests.simulator.harness import APP_ID, REPO, SAMPLE_DIFF, Harness, app_key_pair
from tests.simulator.webhooks import ContentType

__all__ = ["env", "guard", "make_env"]  # the fixtures


ROOT = CHECKOUT
STANDALONE_APP = 77
STANDALONE_INSTALLATION = 31


# -- diffs -------------------------------------------------------------------------------------
@pytest.mark.anyio
async def test_the_diff_media_type_returns_the_diff_text(env: Env) -> None:
    text = await env.client.get_text(env.inst, PR1)
    assert text == SAMPLE_DIFF
    (sent,) = env.world.requests.matching("GET", PR1)
    assert sent.header("accept") == "application/vnd.github.diff"


@pytest.mark.anyio
async def test_a_diff_over_githubs_limit_is_not_acceptable_too_large(
        make_env: MakeEnv, guard: LeakGuard) -> None:
    env = await make_env(settings=Settings(max_diff_files=1))
    error = await guard.raises(NotAcceptable, env.client.get_text(env.inst, PR1))
    assert error.status == 406
    assert error.too_large
    files = [f["filename"] async for f in env.client.paginate(env.inst, f"{PR1}/files")]
    assert files == ["src/app.py", "README.md"]


# -- webhooks: the simulator's sender against the service's verifier -------------------------
@pytest.mark.anyio
@pytest.mark.parametrize("content_type", ["json", "form"])
async def test_the_simulators_deliveries_verify_and_parse(
        env: Env, guard: LeakGuard, content_type: ContentType) -> None:
    # The App's own comment, posted through the client, is what GitHub then delivers.
    posted = await env.client.post_json(env.inst, f"/repos/{REPO}/issues/1/comments",
                                        {"body": "Reviewing now"})
    (event,) = env.world.events
    secret = env.harness.app.webhook_secret
    assert secret is not None
    async with httpx.AsyncClient() as unused:  # build() needs no connection
        sender = WebhookSender(unused, url="/hook", secret=secret, app_id=APP_ID,
                               content_type=content_type)
        delivery = sender.build(event.event, event.payload)
    headers = delivery.headers
    check_signature(delivery.body, headers["X-Hub-Signature-256"], ["old-secret", secret])
    payload = parse_body(delivery.body, headers["Content-Type"])
    assert payload["comment"] == posted
    assert payload["comment"]["performed_via_github_app"]["id"] == APP_ID
    with pytest.raises(SignatureError) as wrong:
        check_signature(delivery.body, headers["X-Hub-Signature-256"], ["not-the-secret"])
    assert guard.saw(wrong.value).reason == "mismatch"
    with pytest.raises(SignatureError) as legacy:  # the SHA-1 header is never enough
        check_signature(delivery.body, headers["X-Hub-Signature"], [secret])
    assert guard.saw(legacy.value).reason == "unsupported_algorithm"


# -- GitHub Enterprise Server layout -------------------------------------------------------------
@pytest.mark.anyio
async def test_a_ghes_base_keeps_its_api_v3_path_through_tokens_and_pages(
        guard: LeakGuard) -> None:
    harness = Harness.create(clock=SimClock(frozen_at=START))
    await harness.client.aclose()
    world = harness.world
    for n in range(120):
        world.add_repository(f"acme/repo-{n:03d}")
    world.installations[harness.installation.id].repository_selection = "all"
    sleep = SimSleep(world)
    jwts = RecordingJWT(AppJWT(APP_ID, harness.private_key_pem, world.clock.now))
    guard.secret_sources.append(lambda: [*world.tokens, *jwts.issued,
                                         *key_lines(harness.private_key_pem)])
    async with GitHubClient("https://ghe.example.com/api/v3/", app_jwt=jwts,
                            clock=world.clock.now, etags=ETagStore(), sleep=sleep,
                            transport=SimulatorTransport(world, prefix="/api/v3")) as client:
        repos = [r async for r in list_installation_repositories(client,
                                                                 harness.installation.id)]
        assert len(repos) == 122
    listing = world.requests.matching("GET", "/installation/repositories")
    assert [r.query.get("page") for r in listing] == [None, ["2"]]
    assert len(world.requests.matching("POST", "/app/installations/*/access_tokens")) == 1
    guard.check()


# -- the standalone simulator ----------------------------------------------------------------
@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[str]:
    """A simulator process seeded from a state file; yields its printed base URL."""
    _, public_pem = app_key_pair()
    (tmp_path / "app.pub.pem").write_bytes(public_pem)
    (tmp_path / "pr1.diff").write_text(SAMPLE_DIFF)
    seed = {
        "app": {"id": STANDALONE_APP, "slug": "pr-reviewer", "public_key_file": "app.pub.pem",
                "webhook_secret": "standalone-webhook-secret", "owner": "acme"},
        "repositories": [{"full_name": REPO, "private": True}],
        "installations": [{"id": STANDALONE_INSTALLATION, "account": "acme",
                           "repositories": [REPO]}],
        "pull_requests": [
            {"repo": REPO, "number": n, "title": f"Change {n}", "user": "alice",
             "head": {"sha": f"{n:040x}", "ref": f"feature-{n}"},
             "base": {"sha": "a" * 40, "ref": "main"}, "diff_file": "pr1.diff"}
            for n in (1, 2, 3)],
    }
    state = tmp_path / "seed.json"
    state.write_text(json.dumps(seed))
    sim = SimulatorProcess(tmp_path, state=state)
    try:
        yield sim.url
    finally:
        sim.close()
    assert sim.process.returncode == 0
    assert "Traceback" not in sim.stderr()


def utc_now() -> datetime:
    # The standalone simulator follows the host clock (offset 0), so the client does too.
    return datetime.now(UTC)


class NoWait:
    """Records the client's waits without waiting (a retry over loopback needs none)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.anyio
async def test_the_client_talks_to_the_standalone_simulator_over_loopback(
        standalone: str, guard: LeakGuard) -> None:
    assert standalone.startswith("http://127.0.0.1:")
    private_pem, _ = app_key_pair()
    jwts = RecordingJWT(AppJWT(STANDALONE_APP, private_pem, utc_now))
    sleep = NoWait()
    tokens_seen: list[str] = []
    guard.secret_sources.append(lambda: [*tokens_seen, *jwts.issued, *key_lines(private_pem),
                                         "standalone-webhook-secret"])
    async with GitHubClient(standalone, app_jwt=jwts, clock=utc_now, etags=ETagStore(),
                            sleep=sleep, rand=lambda: 0.0) as client:
        token = await client.installation_token(STANDALONE_INSTALLATION)
        tokens_seen.append(token)
        assert token.startswith(f"ghs_{STANDALONE_APP}_")
        numbers = [p["number"] async for p in client.paginate(
            STANDALONE_INSTALLATION, f"/repos/{REPO}/pulls", {"per_page": 2})]
        assert numbers == [3, 2, 1]  # newest first, over two pages
        first = await client.get_conditional(STANDALONE_INSTALLATION, f"/repos/{REPO}/pulls")
        again = await client.get_conditional(STANDALONE_INSTALLATION, f"/repos/{REPO}/pulls")
        assert (first.status, again.status) == (200, 304)
        # A connection the server drops without a byte, on real sockets, is retried.
        control = f"{standalone}/_simulator"
        async with httpx.AsyncClient(timeout=10) as http:  # control API: no credentials
            added = await http.post(f"{control}/faults",
                                    json={"path_glob": "/repos/*/pulls/1", "drop": "read_error"})
            assert added.status_code < 300
            pull = await client.get_json(STANDALONE_INSTALLATION, f"/repos/{REPO}/pulls/1")
            assert pull["head"]["sha"] == f"{1:040x}"
            # A POST GitHub performed before the socket died: an error, and no second post.
            comments = f"/repos/{REPO}/issues/2/comments"
            await http.post(f"{control}/faults", json={
                "method": "POST", "path_glob": comments, "drop": "remote_protocol",
                "applied": True})
            lost = await guard.raises(ServerError, client.post_json(
                STANDALONE_INSTALLATION, comments, {"body": "once"}))
            assert lost.status is None
            listed = await client.get_json(STANDALONE_INSTALLATION, comments)
            assert [c["body"] for c in listed] == ["once"]
            recorded = (await http.get(f"{control}/requests")).json()
        assert sleep.waits == [0.5]
        assert [r["status"] for r in recorded if r["path"] == f"/repos/{REPO}/pulls/1"] == [
            None, 200]
        mints = [r for r in recorded if r["path"].endswith("/access_tokens")]
        assert len(mints) == 1
        tokens = client.tokens
        assert isinstance(tokens, InstallationTokens)
        assert tokens.mints == 1
    guard.check()

