"""A restart inside the watermark's own second loses nothing (found by the chaos run).

GitHub's timestamps have one-second resolution. A poll at 09:00:05.3 sets the mark to
09:00:05; a comment (or pull request) made at 09:00:05.7 also says 09:00:05. The poller
remembers in memory what it saw at the mark, so the next poll of the same process finds
the new one. A process killed before that next poll used to come back treating
everything at the mark as already considered, and the comment was never seen: the chaos
run lost a poll-only ``@claude review`` that way. After a restart, items at a mark that a
regular poll set are replayed (every decision is an idempotent insert on its dedupe key);
only a cold start's mark, whose items predate the install, still counts as considered.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.poller_rig import (
    REPO,
    PollerRig,
    poller_rig,  # noqa: F401 - the `rig` fixture
    sha,
)


async def seeded(rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.comment(1, "before the install")
    rig.tick()
    assert (await rig.poll()).success
    assert rig.rows() == []
    rig.tick()


@pytest.mark.anyio
async def test_a_mention_in_the_marks_second_after_the_poll_survives_a_restart(
        rig: PollerRig) -> None:
    await seeded(rig)
    first = rig.comment(1, "@claude review")
    assert (await rig.poll()).success  # the comments mark is now this very second
    assert rig.watermark("comments") == first.created_at
    second = rig.comment(1, "@claude describe")  # same second, after that poll
    await rig.restart()  # killed before the next poll: the in-memory boundary is gone
    assert (await rig.poll()).success
    assert rig.keys() == sorted([f"mention:{REPO}:1:{first.id}", f"mention:{REPO}:1:{second.id}"])
    rig.tick()
    assert (await rig.poll()).success
    assert len(rig.rows()) == 2  # the replay enqueued nothing twice


@pytest.mark.anyio
async def test_a_pull_request_opened_in_the_marks_second_survives_a_restart(
        rig: PollerRig) -> None:
    await seeded(rig)
    rig.open_pull(2)
    assert (await rig.poll()).success
    rig.open_pull(3)  # same second as the mark, after the poll
    await rig.restart()
    assert (await rig.poll()).success
    assert rig.keys() == sorted(f"pr_opened:{REPO}:{n}:{sha(n)}" for n in (2, 3))


@pytest.mark.anyio
async def test_an_edit_in_the_marks_second_still_never_triggers_after_a_restart(
        rig: PollerRig) -> None:
    await seeded(rig)
    old = rig.comment(1, "a plain remark")
    rig.tick()
    rig.comment(1, "@claude review")
    assert (await rig.poll()).success
    rig.world.edit_issue_comment(old, "@claude review")  # an edit, in the mark's second
    await rig.restart()
    assert (await rig.poll()).success
    assert [r.comment_id for r in rig.rows()] != [old.id]
    assert old.id not in {r.comment_id for r in rig.rows()}


@pytest.mark.anyio
async def test_a_cold_start_mark_still_replays_nothing_after_a_restart(rig: PollerRig) -> None:
    rig.open_pull(1)
    rig.comment(1, "@claude review")  # before the install: never a request
    assert (await rig.poll()).success  # the seed: the marks are this very second
    await rig.restart()
    assert (await rig.poll()).success
    assert rig.rows() == []


@pytest.mark.anyio
async def test_a_store_without_seed_rows_starts_replaying_once_its_mark_moves(
        rig: PollerRig) -> None:
    await seeded(rig)
    with rig.store.transaction() as conn:  # as a store written before seeds were recorded
        conn.execute("DELETE FROM watermarks WHERE name LIKE 'seed_%'")
    await rig.restart()
    first = rig.comment(1, "@claude review")
    assert (await rig.poll()).success  # moves past the inherited mark, which it records
    second = rig.comment(1, "@claude describe")
    await rig.restart()
    assert (await rig.poll()).success
    assert rig.keys() == sorted([f"mention:{REPO}:1:{first.id}", f"mention:{REPO}:1:{second.id}"])


@pytest.mark.anyio
@pytest.mark.parametrize("who", ["renovate[bot]", "eve", "bob"])
async def test_a_restarted_poller_takes_no_comment_for_a_push(tmp_path: Path, who: str) -> None:
    # With on_push: a pull request that existed before the start, asked about once, then
    # commented on by a bot, a stranger or anyone after a restart: no automatic review.
    from service.config.schema import TriggersConfig

    rig = PollerRig.create(tmp_path, triggers=TriggersConfig(on_push=True))
    try:
        await seeded(rig)
        asked = rig.comment(1, "@claude review")
        assert (await rig.poll()).success
        await rig.restart()
        rig.tick()
        if who.endswith("[bot]"):
            rig.world.add_user(who, association="NONE")
        rig.comment(1, "deps bumped" if who.endswith("[bot]") else "looks fine", user=who)
        rig.tick()
        assert (await rig.poll()).success
        assert rig.keys() == [f"mention:{REPO}:1:{asked.id}"]  # nothing bought by a restart
        # A real push after that is still a push.
        rig.push(1, sha(91))
        rig.tick()
        assert (await rig.poll()).success
        assert f"pr_opened:{REPO}:1:{sha(91)}" in rig.keys()
    finally:
        await rig.close()
