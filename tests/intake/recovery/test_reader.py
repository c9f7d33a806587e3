"""The delivery log's reader against the simulator's log, on both stores: a delivery lost
while the App was down is asked for again and enqueued once; one GitHub will not or does
not send again is fetched from the log; one the App answered is never taken twice; the
cursor survives a restart, and a reader that takes over mid-way goes on from the store."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import httpx
import pytest

from service.config.schema import ReviewConfig, TriggersConfig
from service.github.auth import AppJWT
from service.github.client import GitHubClient
from service.intake.recovery.plan import PATIENCE
from service.intake.recovery.reader import CURSOR, HookLogReader
from service.intake.rules.decisions import TriggerContext
from service.intake.webhook.deliveries import DeliveryLog
from service.intake.webhook.delivery import Received, Result
from service.observe.metrics.instruments import Metrics
from service.storage import redeliveries
from service.storage.agent_comments import AgentComments
from service.storage.database import Database
from service.storage.etags import StoredETags
from service.storage.watermarks import Watermarks
from tests.kit.queue import QueueDriver
from tests.queue_helpers import T0
from tests.simulator import SimClock, SimulatorTransport, World
from tests.simulator.harness import APP_ID, app_key_pair
from tests.simulator.webhooks import Delivery, WebhookSender

REPO = "acme/widgets"
ATTEMPTS = "/app/hook/deliveries/*/attempts"


class Flip:
    """A leadership a test hands over."""

    def __init__(self, leading: bool) -> None:
        self.leading = leading

    def lead(self) -> bool:
        return self.leading

    def close(self) -> None:
        self.leading = False


@dataclass
class Rig:
    """The simulated GitHub, the App's webhook (its real ingest), and a store."""

    world: World
    store: Database
    private_pem: str
    down: bool = False
    answered: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        context = TriggerContext(config=TriggersConfig(), app_id=APP_ID, app_slug="reviewer",
                                 agent_comments=AgentComments(self.store),
                                 decline_phrases=ReviewConfig.decline_phrases)
        self.deliveries = DeliveryLog(self.store, lambda: context)
        app = httpx.MockTransport(self._webhook)
        self.sender = WebhookSender(httpx.AsyncClient(transport=app, base_url="http://app"),
                                    url="/hook", secret=None, app_id=APP_ID,
                                    log=self.world.hook_log)
        self.client = GitHubClient(
            "https://api.github.com", app_jwt=AppJWT(APP_ID, self.private_pem, self.now),
            clock=self.now, etags=StoredETags(self.store),
            transport=SimulatorTransport(self.world), sleep=self._sleep)

    def now(self):  # type: ignore[no-untyped-def]
        return self.world.clock.now()

    async def _sleep(self, seconds: float) -> None:
        self.world.clock.advance(seconds)

    def _webhook(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            return httpx.Response(503)
        received = Received(request.headers["x-github-delivery"],
                            request.headers["x-github-event"], request.content,
                            request.headers.get("content-type"), self.now())
        (result,) = self.deliveries.receive_batch([received])
        assert isinstance(result, Result)
        self.answered.append(result.outcome)
        return httpx.Response(result.status)

    async def ingest(self, batch: Sequence[Received]) -> list[Result | Exception]:
        return await anyio.to_thread.run_sync(self.deliveries.receive_batch, batch)

    def reader(self, leadership: Flip | None = None) -> HookLogReader:
        return HookLogReader(client=self.client, store=self.store, ingest=self.ingest,
                             clock=self.now, leadership=leadership)

    def opened(self, number: int = 1) -> Delivery:
        pull = self.world.add_pull(REPO, number=number, title="A change", user="alice",
                                   head_sha=secrets.token_hex(20), base_sha="a" * 40,
                                   diff="")
        return self.sender.build("pull_request",
                                 self.world.payloads.pull_request("opened", pull))

    def queued(self) -> list[str]:
        return sorted(row.dedupe_key for row in QueueDriver(self.store).rows())

    def asked(self, guid: str | None = None) -> int:
        posts = self.world.requests.matching("POST", ATTEMPTS)
        return len([r for r in posts if r.status == 202 and (
            guid is None or self.world.hook_log.find(int(r.path.split("/")[4])).guid == guid)])


@pytest.fixture
async def rig(database: Database) -> Rig:
    private_pem, public_pem = app_key_pair()
    world = World(clock=SimClock(frozen_at=T0))
    world.add_app(id=APP_ID, slug="reviewer", public_key_pem=public_pem, owner="acme")
    world.add_repository(REPO)
    world.add_installation(account="acme", repositories=[REPO])
    world.add_user("alice", association="MEMBER")
    return Rig(world=world, store=database, private_pem=private_pem)


@pytest.mark.anyio
async def test_a_delivery_lost_while_the_app_was_down_is_asked_for_and_enqueued_once(
        rig: Rig) -> None:
    lost = rig.opened()
    rig.sender.lose(lost)
    report = await rig.reader().read_once(rig.now())
    assert report.redelivered == [lost.delivery_id] and report.fetched == []
    assert rig.queued() == []  # GitHub sends it; the App takes it as a webhook
    await rig.sender.deliver_pending(rig.world)
    assert len(rig.queued()) == 1
    rig.world.clock.advance(60)
    again = await rig.reader().read_once(rig.now())
    assert (again.redelivered, again.fetched, again.settled) == ([], [], 1)
    assert await rig.store.read_async(redeliveries.pending) == {}
    assert len(rig.queued()) == 1 and rig.asked() == 1


@pytest.mark.anyio
async def test_a_redelivery_that_fails_too_is_fetched_from_the_log(rig: Rig) -> None:
    lost = rig.opened()
    rig.sender.lose(lost)
    await rig.reader().read_once(rig.now())
    rig.down = True  # GitHub cannot reach the App (a proxy in the way), the App runs
    await rig.sender.deliver_pending(rig.world)
    rig.world.clock.advance(60)
    report = await rig.reader().read_once(rig.now())
    assert report.fetched == [lost.delivery_id] and len(rig.queued()) == 1
    rig.down = False
    rig.world.clock.advance(60)
    assert (await rig.reader().read_once(rig.now())).fetched == []
    assert len(rig.queued()) == 1


@pytest.mark.anyio
async def test_a_redelivery_that_does_not_come_in_time_is_fetched(rig: Rig) -> None:
    lost = rig.opened()
    rig.sender.lose(lost)
    await rig.reader().read_once(rig.now())
    rig.world.clock.advance(PATIENCE.total_seconds())
    assert (await rig.reader().read_once(rig.now())).fetched == [lost.delivery_id]
    # GitHub's redelivery arrives after all: a duplicate of what was fetched.
    await rig.sender.deliver_pending(rig.world)
    assert rig.answered == ["duplicate"] and len(rig.queued()) == 1


@pytest.mark.anyio
async def test_a_delivery_the_app_answered_is_never_taken_twice(rig: Rig) -> None:
    """GitHub logged a timeout (the answer came after its 10 s); a guid with one OK
    among failures is done too."""
    await rig.sender.post(rig.opened(1), timed_out=True)
    retried = rig.opened(2)
    rig.down = True
    await rig.sender.post(retried)
    rig.down = False
    await rig.sender.post(retried)  # an operator's "Redeliver" went through
    report = await rig.reader().read_once(rig.now())
    assert (report.redelivered, report.fetched, report.settled) == ([], [], 2)
    assert rig.asked() == 0 and len(rig.queued()) == 2


@pytest.mark.anyio
async def test_past_githubs_redelivery_window_it_is_fetched(rig: Rig) -> None:
    lost = rig.opened()
    rig.sender.lose(lost)
    rig.world.hook_log.redeliver_days = 0  # listed, but GitHub answers 422 to redeliver
    rig.world.clock.advance(1)
    report = await rig.reader().read_once(rig.now())
    assert report.redelivered == [] and report.fetched == [lost.delivery_id]
    assert len(rig.queued()) == 1


@pytest.mark.anyio
async def test_the_cursor_survives_a_restart_and_a_failed_step_holds_it(rig: Rig) -> None:
    first, second = rig.opened(1), rig.opened(2)
    rig.sender.lose(first)
    rig.sender.lose(second)
    rig.world.faults.add(method="POST", path_glob=ATTEMPTS, status=502, times=1, skip=1)
    report = await rig.reader().read_once(rig.now())
    assert len(report.redelivered) == 1 and len(report.failures) == 1
    assert Watermarks(rig.store).get(CURSOR) is None  # held: the next read redoes it
    # A restarted process reads the same attempts: the one asked for waits, the other is
    # asked for now; neither twice.
    again = await rig.reader().read_once(rig.now())
    assert again.redelivered == sorted({first.delivery_id, second.delivery_id}
                                       - set(report.redelivered))
    assert rig.asked(first.delivery_id) == rig.asked(second.delivery_id) == 1
    assert Watermarks(rig.store).get(CURSOR) is not None
    await rig.sender.deliver_pending(rig.world)
    rig.world.clock.advance(60)
    later = await rig.reader().read_once(rig.now())
    assert (later.redelivered, later.fetched, later.pages) == ([], [], 1)
    assert len(rig.queued()) == 2


@pytest.mark.anyio
async def test_a_reader_that_takes_over_mid_way_goes_on_from_the_store(rig: Rig) -> None:
    """The leader lists two pages, asks for the failed delivery on the first and fails on
    the one on the second, then loses the lead: the next leader asks for the second
    only, and fetches the first when GitHub has not sent it within its patience."""
    older = rig.opened(1)
    rig.sender.lose(older)
    for _ in range(120):
        await rig.sender.ping(rig.world)
    newer = rig.opened(2)
    rig.sender.lose(newer)
    rig.world.faults.add(method="POST", path_glob=ATTEMPTS, status=502, times=1, skip=1)
    a, b = Flip(True), Flip(False)
    first = await rig.reader(a).read_once(rig.now())
    assert first.pages == 2 and len(first.redelivered) == 1 and len(first.failures) == 1
    a.leading, b.leading = False, True
    assert not (await rig.reader(a).read_once(rig.now())).leading
    rig.world.clock.advance(PATIENCE.total_seconds())
    taken_over = await rig.reader(b).read_once(rig.now())
    assert taken_over.fetched == first.redelivered  # asked by A, never came: fetched
    assert taken_over.redelivered == [g for g in (older.delivery_id, newer.delivery_id)
                                      if g not in first.redelivered]
    await rig.sender.deliver_pending(rig.world)
    assert len(rig.queued()) == 2
    for guid in (older.delivery_id, newer.delivery_id):
        assert rig.asked(guid) == 1


@pytest.mark.anyio
async def test_each_read_is_counted_with_what_it_recovered(rig: Rig) -> None:
    """``/metrics``: a read whose request failed, one that asked for two deliveries,
    one that fetched them when GitHub did not send them, one while another leads."""
    rig.sender.lose(rig.opened(1))
    rig.world.faults.add(method="POST", path_glob=ATTEMPTS, status=502, times=1)
    metrics = Metrics()
    leadership = Flip(True)
    reader = HookLogReader(client=rig.client, store=rig.store, ingest=rig.ingest,
                           clock=rig.now, leadership=leadership, sleep=rig._sleep,
                           metrics=metrics)
    await reader.run(reads=1)  # GitHub answers 502: the step failed
    rig.sender.lose(rig.opened(2))
    await reader.run(reads=1)  # both asked for
    rig.world.clock.advance(PATIENCE.total_seconds())
    await reader.run(reads=1)  # neither came: both fetched
    leadership.leading = False
    await reader.run(reads=1)

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(f"pr_review_agent_{name}_total", labels)

    assert [sample("delivery_log_reads", result=r) for r in ("ok", "failed", "standby")] \
        == [2.0, 1.0, 1.0]
    assert sample("delivery_log_recovered", action="redelivered") == 2.0
    assert sample("delivery_log_recovered", action="fetched") == 2.0
    assert len(rig.queued()) == 2
