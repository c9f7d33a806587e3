"""Where something happened, from the search API (``fanin.search``): the repositories
with a pull request updated since, within the installation, on the search API's own
limit; and None whenever the answer cannot be trusted to be whole."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from service.intake.poller.fanin import qualifier, search
from tests.poller_rig import REPO, PollerRig, poller_rig

__all__ = ["poller_rig"]  # the ``rig`` fixture

OTHER = "acme/gadgets"


@pytest.mark.anyio
async def test_the_repositories_with_an_updated_pull_request_and_their_newest_update(
        tmp_path: Path) -> None:
    rig = PollerRig.create(tmp_path, repos=(REPO, OTHER, "acme/idle"))
    try:
        since = rig.tick(60)
        rig.tick(5)
        rig.open_pull(1)
        rig.open_pull(2, repo=OTHER)
        later = rig.tick(5)
        rig.comment(1, "a question")
        found = await search(rig.client, rig.installation.id, "acme", "Organization",
                             since)
        assert found is not None and found.whole
        assert found.repositories == {REPO: later, OTHER: later - timedelta(seconds=5)}
        # The installation's core limit is untouched: search has its own.
        core = rig.client.rate_limit(rig.installation.id)
        assert core is None or core.used == 0
        assert rig.client.rate_limit(rig.installation.id, "search") is not None
    finally:
        await rig.close()


@pytest.mark.anyio
async def test_an_answer_that_cannot_be_used_is_none(rig: PollerRig) -> None:
    rig.world.faults.add(method="GET", path_glob="/search/issues", status=422, times=1)
    assert await search(rig.client, rig.installation.id, "acme", "Organization",
                        rig.now()) is None
    rig.world.faults.add(method="GET", path_glob="/search/issues", status=200, times=1,
                         body={"total_count": 1, "incomplete_results": True, "items": []})
    assert await search(rig.client, rig.installation.id, "acme", "Organization",
                        rig.now()) is None


def test_the_account_is_named_as_search_names_it() -> None:
    assert qualifier("acme", "Organization") == "org:acme"
    assert qualifier("alice", "User") == "user:alice"
