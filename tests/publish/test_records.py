"""The publisher's view of one run in the store: an attempt takes the run's lease and
reads it as recorded; a second attempt meanwhile gets nothing; an outcome is recorded
once — on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from service.publish import records
from service.storage import agent_comments
from tests.publisher_rig import ANCHORED, Rig, publisher_rig

__all__ = ["publisher_rig"]


@pytest.mark.anyio
async def test_an_attempt_leases_the_run_and_reads_it_as_recorded(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED,))
    until = rig.now() + timedelta(minutes=1)
    with rig.store.transaction() as tx:
        publication = records.claim(tx, run.dedupe_key, rig.now(), until)
    assert publication is not None
    assert (publication.dedupe_key, publication.kind, publication.pr_number) == (
        run.dedupe_key, "mention", pr.number)
    assert publication.findings == (ANCHORED,) and publication.attempts == 1
    assert publication.account.tokens == 4321  # the ledger's settled usage
    with rig.store.transaction() as tx:  # leased: a second attempt gets nothing
        assert records.claim(tx, run.dedupe_key, rig.now(), until) is None
        assert records.claim(tx, "mention:acme/widgets:1:404", rig.now(), until) is None
    with rig.store.read() as tx:
        assert records.load(tx, run.dedupe_key) == publication


@pytest.mark.anyio
async def test_an_outcome_is_recorded_once_with_the_apps_own_comments(rig: Rig) -> None:
    run = rig.record(rig.opened(rig.add_pull()))
    with rig.store.transaction() as tx:
        assert records.claim(tx, run.dedupe_key, rig.now(),
                             rig.now() + timedelta(minutes=1)) is not None
        assert records.record_outcome(tx, key=run.dedupe_key, repo=run.claim.job.repo,
                                      outcome="published", now=rig.now(), published=True,
                                      comment_id=None, posted=(9001,))
        assert not records.record_outcome(tx, key=run.dedupe_key, repo=run.claim.job.repo,
                                          outcome="published", now=rig.now(),
                                          published=True, comment_id=None)
    with rig.store.read() as tx:
        assert agent_comments.is_ours(tx, 9001)


@pytest.mark.anyio
async def test_an_outcome_that_is_not_one_is_refused(rig: Rig) -> None:
    with rig.store.transaction() as tx, pytest.raises(ValueError, match="publish outcome"):
        records.record_outcome(tx, key="k", repo="acme/widgets", outcome="posted",
                               now=rig.now(), published=True, comment_id=None)
