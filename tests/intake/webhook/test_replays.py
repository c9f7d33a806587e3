"""A replayed webhook does nothing twice (docs/SECURITY.md).

GitHub signs a delivery's body, not its ``X-GitHub-Delivery`` or when it was sent: anyone
holding one captured delivery (a public smee.io channel, a proxy's log) can send it again
under a new id, and it verifies. So every payload kind the App can receive, sent once as
GitHub would and then again under a new id, in every state a pull request can be in,
must leave the store as the first left it: no row queued, revived or cancelled, no
closure recorded, no finding moved, no repository lost or gained, nothing charged, and so
nothing a person would see and nothing a worker would spend. Effects a replay could undo
wrongly are not taken from deliveries at all: a close is the poller's to record, from
GitHub's own listing; an installation removed is put back by the poller's next listing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from service.app import retention
from service.config.secret import Secret
from service.github.auth import AppJWT
from service.github.client import GitHubClient
from service.intake.poller.targets import discover, record_repositories
from service.storage import closures, posted_findings
from service.storage.posted_findings import PostedFinding
from tests.kit.stores import BACKENDS
from tests.simulator import SimulatorTransport
from tests.simulator.harness import REPO
from tests.webhook_env import NOW, Env, open_env, opened, pr_key

pytestmark = pytest.mark.anyio

Kind = Callable[[Env], tuple[str, dict[str, Any]]]


def _pull(env: Env) -> Any:
    return env.world.pull(REPO, 1)


def _comment(env: Env, body: str, user: str = "alice") -> Any:
    return env.world.add_issue_comment(REPO, 1, user=user, body=body)


def _finding_thread(env: Env) -> tuple[int, Any]:
    root = env.world.add_review_comment(REPO, 1, user=env.harness.app.slug + "[bot]",
                                        body="**major** json is imported twice",
                                        path="src/app.py", line=3)
    return root.id, root


def _decline_kind(env: Env) -> tuple[str, dict[str, Any]]:
    return _decline(env)


#: Every payload kind the App can be sent, built from the world as it is now.
KINDS: dict[str, Kind] = {
    "pull_request opened": lambda env: ("pull_request", opened(env)),
    "pull_request reopened": lambda env: ("pull_request", env.world.payloads.pull_request(
        "reopened", _pull(env))),
    "pull_request ready_for_review": lambda env: ("pull_request",
                                                  env.world.payloads.pull_request(
                                                      "ready_for_review", _pull(env))),
    "pull_request synchronize": lambda env: ("pull_request", env.world.payloads.pull_request(
        "synchronize", _pull(env), before="a" * 40)),
    "pull_request closed": lambda env: ("pull_request", env.world.payloads.pull_request(
        "closed", _pull(env))),
    "pull_request converted_to_draft": lambda env: ("pull_request",
                                                    env.world.payloads.pull_request(
                                                        "converted_to_draft", _pull(env))),
    "pull_request edited": lambda env: ("pull_request", env.world.payloads.pull_request(
        "edited", _pull(env), changes={"title": {"from": "Old"}})),
    "issue_comment created, a mention": lambda env: ("issue_comment",
                                                     env.world.payloads.issue_comment(
                                                         "created",
                                                         _comment(env, "@claude review"))),
    "issue_comment created, a describe": lambda env: ("issue_comment",
                                                      env.world.payloads.issue_comment(
                                                          "created",
                                                          _comment(env, "@claude describe"))),
    "issue_comment created, no mention": lambda env: ("issue_comment",
                                                      env.world.payloads.issue_comment(
                                                          "created", _comment(env, "LGTM"))),
    "issue_comment edited": lambda env: ("issue_comment", env.world.payloads.issue_comment(
        "edited", _comment(env, "@claude review"), changes={"body": {"from": "x"}})),
    "issue_comment deleted": lambda env: ("issue_comment", env.world.payloads.issue_comment(
        "deleted", _comment(env, "@claude review"))),
    "pull_request_review_comment, a decline": _decline_kind,
    "pull_request_review_comment, a mention": lambda env: (
        "pull_request_review_comment", env.world.payloads.pull_request_review_comment(
            "created", env.world.add_review_comment(
                REPO, 1, user="alice", body="@claude review", path="src/app.py", line=3))),
    "installation created": lambda env: ("installation", env.world.payloads.installation(
        "created", env.harness.installation)),
    "installation deleted": lambda env: ("installation", env.world.payloads.installation(
        "deleted", env.harness.installation)),
    "installation suspend": lambda env: ("installation", env.world.payloads.installation(
        "suspend", env.harness.installation)),
    "installation_repositories removed": lambda env: (
        "installation_repositories", env.world.payloads.installation_repositories(
            "removed", env.harness.installation, removed=[env.world.repo(REPO)])),
    "installation_repositories added": lambda env: (
        "installation_repositories", env.world.payloads.installation_repositories(
            "added", env.harness.installation, added=[env.world.repo(REPO)])),
    "ping": lambda env: ("ping", {"zen": "Design for failure.", "hook_id": 1}),
    "push": lambda env: ("push", {"ref": "refs/heads/main", "repository": {
        "full_name": REPO}}),
}


def _decline(env: Env) -> tuple[str, dict[str, Any]]:
    root_id, _ = _finding_thread(env)
    with env.store.transaction() as tx:
        posted_findings.remember(tx, REPO, 1, head_sha=_pull(env).head.head_sha, posted=[
            PostedFinding("fp-1", "src/app.py", 3, "major", "correctness", root_id)], now=NOW)
    reply = env.world.reply_to_review_comment(REPO, 1, root_id, user="alice",
                                              body="Won't fix: intended.")
    return "pull_request_review_comment", env.world.payloads.pull_request_review_comment(
        "created", reply)


def _open_waiting(env: Env) -> None:
    """The pull request open, its automatic review queued, a mention waiting."""


def _reviewed(env: Env) -> None:
    """Its head reviewed (the row done) and a finding of the App's posted."""
    with env.store.transaction() as tx:
        tx.execute("UPDATE queue SET status = 'done'")


def _closed(env: Env, *, merged: bool) -> None:
    """Closed on GitHub, and recorded as the poller records it (rows cancelled)."""
    env.world.close(REPO, 1, merged=merged)
    env.queue.cancel_pull_request(REPO, 1)
    with env.store.transaction() as tx:
        closures.record_close(tx, REPO, 1, merged=merged, at=NOW)


STATES: dict[str, Callable[[Env], None]] = {
    "open, waiting": _open_waiting,
    "open, reviewed": _reviewed,
    "closed": lambda env: _closed(env, merged=False),
    "merged": lambda env: _closed(env, merged=True),
}


def effects(env: Env) -> dict[str, list[tuple[Any, ...]]]:
    """Everything a delivery can change that a person or a worker would notice."""
    queries = {
        "queue": "SELECT dedupe_key, status, attempts, leased_until FROM queue",
        "closures": "SELECT repo, pr_number, merged, closed_at, purged_at"
                    " FROM closed_pull_requests",
        "findings": "SELECT fingerprint, state FROM posted_findings",
        "repositories": "SELECT repo, installation_id, removed_at IS NULL FROM repositories",
        "summaries": "SELECT repo, pr_number, version FROM pr_summaries",
        "ledger": "SELECT dedupe_key, reserved_tokens FROM ledger",
        "runs": "SELECT dedupe_key FROM runs",
        "checks": "SELECT dedupe_key, status FROM checks",
    }
    with env.store.read() as tx:
        return {name: sorted(tuple(r) for r in tx.execute(sql))
                for name, sql in queries.items()}


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with open_env(tmp_path) as opened_env:
        await opened_env.sender.send("installation", opened_env.world.payloads.installation(
            "created", opened_env.harness.installation), delivery_id="setup-installation")
        await opened_env.sender.send("pull_request", opened(opened_env),
                                     delivery_id="setup-opened")
        await opened_env.sender.send("issue_comment", opened_env.world.payloads.issue_comment(
            "created", _comment(opened_env, "@claude review")), delivery_id="setup-mention")
        yield opened_env


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", KINDS)
async def test_a_delivery_sent_again_under_a_new_id_changes_nothing(
        env: Env, kind: str, state: str) -> None:
    STATES[state](env)
    event, payload = KINDS[kind](env)
    first = await env.sender.send(event, payload, delivery_id="original")
    assert first.status_code < 500, first.text
    after_first = effects(env)

    again = await env.sender.send(event, payload, delivery_id="replayed")

    assert again.status_code == first.status_code, again.text
    assert effects(env) == after_first
    if first.status_code == 202:  # the same answer: nothing new queued by the replay
        assert again.json()["enqueued"] == first.json()["enqueued"]


@pytest.fixture(params=BACKENDS)
async def backend_env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with open_env(tmp_path, backend=request.param) as opened_env:
        yield opened_env


async def test_a_captured_close_sent_while_the_pull_request_is_open_cancels_nothing(
        backend_env: Env) -> None:
    """The attack as it was seen: a pull request closed once and reopened; its ``closed``
    delivery captured and sent again while an allowed person's ``@claude review`` waits.
    The request still waits, no closure is recorded (so retention purges nothing and the
    poller sees no reopen to review again), and no check run says it was closed."""
    env = backend_env
    env.world.close(REPO, 1)
    captured = env.world.payloads.pull_request("closed", _pull(env))
    env.world.reopen(REPO, 1)
    await env.sender.send("pull_request", opened(env), delivery_id="d-open")
    mention = _comment(env, "@claude review")
    await env.sender.send("issue_comment", env.world.payloads.issue_comment(
        "created", mention), delivery_id="d-mention")
    before = effects(env)

    for n in range(2):
        replay = await env.sender.send("pull_request", captured, delivery_id=f"replay-{n}")
        assert replay.status_code == 202
        assert replay.json()["ignored"] == "closed_by_poller"

    assert effects(env) == before
    key = f"mention:{REPO}:1:{mention.id}"
    assert env.queue.get(key).status == "pending"  # type: ignore[union-attr]
    assert env.queue.get(pr_key(env)).status == "pending"  # type: ignore[union-attr]
    assert retention.sweep(env.store, NOW + timedelta(days=30), timedelta(0)) == 0


async def test_a_replayed_uninstall_is_put_right_by_the_pollers_next_listing(
        backend_env: Env) -> None:
    """An old ``installation`` ``deleted`` sent again while the App is installed drops the
    repositories from the store for a moment; GitHub still lists them, and the poller's
    next listing records them again. Meanwhile nothing is refused: the workers find an
    installation through GitHub when the store does not know it."""
    env = backend_env
    inst = env.harness.installation
    await env.sender.send("installation", env.world.payloads.installation("created", inst),
                          delivery_id="d-created")
    installed = effects(env)["repositories"]
    await env.sender.send("installation", env.world.payloads.installation("deleted", inst),
                          delivery_id="d-replayed-deleted")
    assert effects(env)["repositories"] != installed

    async with GitHubClient(
            "https://api.github.com", clock=env.world.clock.now,
            app_jwt=AppJWT(env.harness.app.id, Secret(env.harness.private_key_pem),
                           env.world.clock.now),
            transport=SimulatorTransport(env.world)) as github:
        found = await discover(github)
    record_repositories(env.store, found, NOW)

    assert effects(env)["repositories"] == installed
