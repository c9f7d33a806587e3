"""``installation`` and ``installation_repositories`` deliveries keep ``repositories`` current."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from service.app.web import InstallationChange
from service.storage.times import to_db_time
from tests.kit.stores import BACKENDS
from tests.webhook_env import NOW, Env, open_env


@pytest.fixture(params=BACKENDS)
async def env(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Env]:
    async with open_env(tmp_path, backend=request.param) as opened:
        yield opened


def repositories(env: Env) -> dict[str, tuple[int, str, str | None]]:
    return {repo: (inst, added, removed) for repo, inst, added, removed in env.rows("repositories")}


@pytest.mark.anyio
async def test_installation_created_records_its_repositories(env: Env) -> None:
    inst = env.harness.installation
    response = await env.sender.send(
        "installation", env.world.payloads.installation("created", inst), delivery_id="i-1")

    assert response.status_code == 202
    assert response.json() == {"delivery": "i-1", "enqueued": [], "ignored": None}
    stamp = to_db_time(NOW)
    assert repositories(env) == {"acme/gadgets": (inst.id, stamp, None),
                                 "acme/widgets": (inst.id, stamp, None)}
    assert env.changes == [InstallationChange(inst.id, "created",
                                              added=("acme/widgets", "acme/gadgets"))]
    assert env.delivery("i-1")["outcome"] == (  # type: ignore[index]
        "installation:created:added=2,removed=0")


@pytest.mark.anyio
async def test_repositories_added_and_removed(env: Env) -> None:
    world, inst = env.world, env.harness.installation
    await env.sender.send("installation", world.payloads.installation("created", inst))
    tools = world.add_repository("acme/tools")
    env.clock.now = later = NOW.replace(hour=13)

    added = world.payloads.installation_repositories("added", inst, added=[tools])
    removed = world.payloads.installation_repositories(
        "removed", inst, removed=[world.repo("acme/gadgets")])
    assert (await env.sender.send("installation_repositories", added)).status_code == 202
    assert (await env.sender.send("installation_repositories", removed)).status_code == 202

    rows = repositories(env)
    assert rows["acme/tools"] == (inst.id, to_db_time(later), None)
    assert rows["acme/gadgets"][2] == to_db_time(later)
    assert rows["acme/widgets"] == (inst.id, to_db_time(NOW), None)
    assert [c.action for c in env.changes] == ["created", "added", "removed"]
    assert env.changes[-1].removed == ("acme/gadgets",)


@pytest.mark.anyio
@pytest.mark.parametrize("action", ["deleted", "suspend"])
async def test_uninstalling_or_suspending_removes_every_repository(env: Env, action: str) -> None:
    inst = env.harness.installation
    await env.sender.send("installation", env.world.payloads.installation("created", inst))
    env.clock.now = gone = NOW.replace(hour=14)

    response = await env.sender.send("installation",
                                     env.world.payloads.installation(action, inst))

    assert response.status_code == 202
    assert {r[2] for r in repositories(env).values()} == {to_db_time(gone)}
    assert env.changes[-1] == InstallationChange(inst.id, action,
                                                 removed=("acme/gadgets", "acme/widgets"))


@pytest.mark.anyio
async def test_reinstalling_restores_a_removed_repository(env: Env) -> None:
    inst = env.harness.installation
    await env.sender.send("installation", env.world.payloads.installation("created", inst))
    await env.sender.send("installation", env.world.payloads.installation("suspend", inst))
    env.clock.now = back = NOW.replace(hour=15)

    await env.sender.send("installation", env.world.payloads.installation("unsuspend", inst))

    assert repositories(env)["acme/widgets"] == (inst.id, to_db_time(back), None)


@pytest.mark.anyio
async def test_a_late_removal_from_an_old_installation_keeps_the_new_one(env: Env) -> None:
    world, old = env.world, env.harness.installation
    await env.sender.send("installation", world.payloads.installation("created", old))
    moved = world.add_installation(account="acme", repositories=["acme/widgets"])
    await env.sender.send("installation_repositories", world.payloads.installation_repositories(
        "added", moved, added=[world.repo("acme/widgets")]))

    late = world.payloads.installation_repositories(
        "removed", old, removed=[world.repo("acme/widgets")])
    assert (await env.sender.send("installation_repositories", late)).status_code == 202

    assert repositories(env)["acme/widgets"] == (moved.id, to_db_time(NOW), None)


@pytest.mark.anyio
@pytest.mark.parametrize("damage", ["no_installation", "bad_repository", "not_a_list"])
async def test_a_malformed_installation_delivery_is_202_ignored(env: Env, damage: str) -> None:
    payload = env.world.payloads.installation("created", env.harness.installation)
    if damage == "no_installation":
        del payload["installation"]
    elif damage == "bad_repository":
        payload["repositories"].append({"full_name": "no-slash"})
    else:
        payload["repositories"] = "acme/widgets"

    response = await env.sender.send("installation", payload, delivery_id="bad")

    assert response.status_code == 202
    assert response.json()["ignored"] == "malformed_payload"
    assert repositories(env) == {} and env.changes == []
    assert env.delivery("bad")["outcome"] == "ignored:malformed_payload"  # type: ignore[index]


@pytest.mark.anyio
async def test_an_installation_action_it_does_not_know_changes_nothing(env: Env) -> None:
    payload = env.world.payloads.installation("created", env.harness.installation)
    payload["action"] = "transferred"

    response = await env.sender.send("installation", payload)

    assert response.status_code == 202
    assert response.json()["ignored"] == "action:transferred"
    assert repositories(env) == {} and env.changes == []


@pytest.mark.anyio
async def test_a_redelivered_installation_event_does_not_call_back_again(env: Env) -> None:
    delivery = env.sender.build(
        "installation", env.world.payloads.installation("created", env.harness.installation))
    await env.sender.post(delivery)

    again = await env.sender.post(delivery)

    assert again.status_code == 200 and again.json() == {"duplicate": True}
    assert len(env.changes) == 1


@pytest.mark.anyio
async def test_a_failing_callback_neither_undoes_nor_fails_the_delivery(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[InstallationChange] = []

    def explode(change: InstallationChange) -> None:
        calls.append(change)
        raise RuntimeError("the poller is not listening")

    async with open_env(tmp_path, callback=explode) as env:
        payload = env.world.payloads.installation("created", env.harness.installation)
        response = await env.sender.send("installation", payload)

        assert response.status_code == 202
        assert len(calls) == 1
        assert set(repositories(env)) == {"acme/gadgets", "acme/widgets"}
    assert any(r.getMessage() == "installation-change callback failed" for r in caplog.records)
