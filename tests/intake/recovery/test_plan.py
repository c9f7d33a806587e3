"""What the delivery log's reader does about each guid (``plan``, pure): GitHub's own
procedure — group by guid, leave a guid with any ``OK`` — and never a guid the App
recorded; ask GitHub first, fetch when it will not or did not deliver."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from service.intake.recovery.plan import MARGIN, PATIENCE, WINDOW, Logged, Step, logged, plan
from service.storage.redeliveries import Requested
from tests.kit.thorough import examples
from tests.queue_helpers import T0

NOW = T0 + timedelta(days=1)


def attempt(ident: int, guid: str, *, ok: bool = False, ago: timedelta = timedelta(minutes=5),
            redelivery: bool = False) -> Logged:
    return Logged(id=ident, guid=guid, delivered_at=NOW - ago, ok=ok, event="pull_request",
                  action="opened", redelivery=redelivery)


def test_a_failed_delivery_is_asked_for_again_and_a_guid_with_one_ok_is_left() -> None:
    listed = [attempt(3, "g1"), attempt(2, "g2", ok=True), attempt(1, "g2")]
    steps, settled = plan(listed, taken=set(), requested={}, now=NOW)
    assert steps == [Step("redeliver", "g1", 3)]
    assert settled == {"g2"}


def test_a_delivery_the_app_recorded_is_never_taken_twice() -> None:
    """GitHub gave up waiting (a timeout) after the App had answered it: it is in."""
    steps, settled = plan([attempt(5, "g1")], taken={"g1"}, requested={}, now=NOW)
    assert steps == [] and settled == {"g1"}


def test_near_the_end_of_githubs_window_it_is_fetched_not_asked_for() -> None:
    old = attempt(4, "g1", ago=WINDOW - MARGIN + timedelta(seconds=1))
    assert plan([old], taken=set(), requested={}, now=NOW)[0] == [Step("fetch", "g1", 4)]
    young = attempt(4, "g1", ago=WINDOW - MARGIN - timedelta(seconds=1))
    assert plan([young], taken=set(), requested={}, now=NOW)[0] == [Step("redeliver", "g1", 4)]


def test_a_redelivery_asked_for_is_waited_for_then_fetched() -> None:
    asked = {"g1": Requested(delivery_id=4, at=NOW - timedelta(seconds=30))}
    # Not back yet and within patience: nothing to do.
    assert plan([attempt(4, "g1")], taken=set(), requested=asked, now=NOW) == ([], set())
    # GitHub's attempt came back and failed too: fetched now.
    again = [attempt(9, "g1", ago=timedelta(seconds=10), redelivery=True), attempt(4, "g1")]
    assert plan(again, taken=set(), requested=asked, now=NOW)[0] == [Step("fetch", "g1", 9)]
    # No attempt within patience (not even listed any more): fetched by the entry asked.
    late = NOW + PATIENCE
    assert plan([], taken=set(), requested=asked, now=late)[0] == [Step("fetch", "g1", 4)]
    # It came back OK: settled, its row can go.
    done = [attempt(9, "g1", ok=True, redelivery=True), attempt(4, "g1")]
    assert plan(done, taken=set(), requested=asked, now=NOW) == ([], {"g1"})


def test_an_entry_not_shaped_like_githubs_is_none() -> None:
    good = {"id": 7, "guid": "g", "delivered_at": "2026-11-02T09:00:00Z", "status": "OK",
            "event": "ping", "action": None, "redelivery": False}
    assert logged(good) == Logged(7, "g", T0, True, "ping")
    for broken in ({**good, "id": True}, {**good, "guid": ""}, {**good, "delivered_at": "x"},
                   {**good, "event": None}, "text"):
        assert logged(broken) is None


guids = st.sampled_from(["a", "b", "c", "d"])
attempts = st.builds(attempt, st.integers(1, 50), guids, ok=st.booleans(),
                     ago=st.timedeltas(timedelta(0), timedelta(days=3)))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(attempts, max_size=12), st.sets(guids),
       st.dictionaries(guids, st.builds(Requested, st.integers(1, 50),
                                        st.just(NOW - timedelta(minutes=1)))))
def test_one_step_at_most_per_guid_and_never_for_one_settled(
        listed: list[Logged], taken: set[str], requested: dict[str, Requested]) -> None:
    steps, settled = plan(listed, taken=taken, requested=requested, now=NOW)
    stepped = [s.guid for s in steps]
    assert len(stepped) == len(set(stepped))
    assert not set(stepped) & settled
    assert taken & {a.guid for a in listed} <= settled
    for step in steps:
        assert not any(a.ok for a in listed if a.guid == step.guid)
