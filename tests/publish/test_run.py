"""The ``runs`` row a paid run writes before publishing: what it holds reads back as the
publisher will read it, a second run for one trigger is refused, and an outcome that is
not one is refused when the run is made — on both backends."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.engine.base import Assessment
from service.publish.records import load
from service.publish.run import RecordedRun, record_run
from service.publish.run_content import Omitted
from service.storage.errors import STORE_ERRORS
from tests.publisher_rig import ANCHORED, Rig, publisher_rig

__all__ = ["publisher_rig"]


@pytest.mark.anyio
async def test_what_a_run_holds_reads_back_as_the_publisher_reads_it(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED,),
                     assessment=Assessment("One issue.", "low"),
                     omitted=(Omitted("vendor/x.js", "excluded", 40, "vendor/**"),))
    with rig.store.read() as tx:
        publication = load(tx, run.dedupe_key)
    assert publication is not None
    assert (publication.repo, publication.pr_number, publication.head_sha) == (
        run.claim.job.repo, pr.number, run.head_sha)
    assert publication.findings == (ANCHORED,)
    assert publication.assessment == Assessment("One issue.", "low")
    assert publication.omitted == run.omitted and publication.outcome == "completed"


@pytest.mark.anyio
async def test_a_second_run_for_one_trigger_is_refused(rig: Rig) -> None:
    run = rig.record(rig.opened(rig.add_pull()))
    with pytest.raises(STORE_ERRORS), rig.store.transaction() as tx:
        record_run(tx, replace(run, recorded_at=rig.now()))


@pytest.mark.anyio
async def test_an_outcome_that_is_not_one_is_refused_when_the_run_is_made(rig: Rig) -> None:
    run = rig.record(rig.opened(rig.add_pull()))
    with pytest.raises(ValueError, match="outcome must be one of"):
        replace(run, outcome="posted")  # type: ignore[arg-type]
    assert isinstance(run, RecordedRun) and run.dedupe_key == run.claim.dedupe_key
