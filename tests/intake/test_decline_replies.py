"""A reply that declines one of the App's findings, read as it arrives: the rule
(``classify_comment`` → ``Decline``), the ingest seam that marks the finding, the webhook's
recorded outcome, and the poller's comment stream catching a reply no webhook delivered."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from service.config.schema import TriggersConfig
from service.intake.ingest import Decided, apply_decisions
from service.intake.rules.classify import classify_comment
from service.intake.rules.decisions import Decline, Ignore, TriggerContext
from service.storage import posted_findings, summaries
from service.storage.database import Database
from service.storage.posted_findings import PostedFinding
from tests.poller_rig import REPO, T0, PollerRig, poller_rig  # noqa: F401 - the `rig` fixture
from tests.simulator.harness import APP_ID, SAMPLE_DIFF
from tests.simulator.models import ReviewComment
from tests.webhook_env import NOW, open_env

PHRASES = ("won't fix", "false positive")
CTX = TriggerContext(config=TriggersConfig(), app_id=APP_ID, app_slug="pr-reviewer",
                     decline_phrases=PHRASES)


def reply(body: str, *, login: str = "bob", association: str = "MEMBER",
          reply_to: int | None = 41, user_type: str = "User") -> dict[str, Any]:
    obj: dict[str, Any] = {"id": 99, "body": body, "author_association": association,
                           "user": {"login": login, "id": 7, "type": user_type}}
    if reply_to is not None:
        obj["in_reply_to_id"] = reply_to
    return obj


# -- the rule (pure) --------------------------------------------------------------------------

@pytest.mark.parametrize(("obj", "author", "expected"), [
    (reply("Won't fix: the caller closes it."), None,
     Decline(repo=REPO, pr_number=3, reply_to=41, by="bob")),
    (reply("won’t FIX"), None, Decline(repo=REPO, pr_number=3, reply_to=41, by="bob")),
    (reply("  False positive, see the test"), None,
     Decline(repo=REPO, pr_number=3, reply_to=41, by="bob")),
    # the pull request's author counts whatever their association, when the caller knows it
    (reply("won't fix", login="Eve", association="NONE"), "eve",
     Decline(repo=REPO, pr_number=3, reply_to=41, by="Eve")),
    (reply("won't fix", login="eve", association="NONE"), None,
     Ignore("decliner_not_allowed", "eve (NONE)")),
    (reply("won't fix", login="eve", association="NONE"), "alice",
     Ignore("decliner_not_allowed", "eve (NONE)")),
    (reply("I won't fix this today, but I will"), None, Ignore("no_mention")),  # not a start
    (reply("won't fix", reply_to=None), None, Ignore("no_mention")),  # not a reply
    (reply("won't fix", login="renovate[bot]", user_type="Bot"), None,
     Ignore("bot_author", "renovate[bot]")),
])
def test_a_reply_that_starts_with_a_phrase_declines(
        obj: dict[str, Any], author: str | None, expected: object) -> None:
    assert classify_comment(obj, "review", REPO, 3, CTX, pr_author=author) == expected


def test_a_mention_in_a_reply_on_someone_elses_thread_is_a_request_not_a_decline() -> None:
    decision = classify_comment(reply("won't fix, but @claude review the rest"), "review",
                                REPO, 3, CTX)
    assert not isinstance(decision, Decline)
    assert type(decision).__name__ == "Enqueue"


def test_on_the_apps_own_thread_a_decline_stays_a_decline_even_naming_the_app() -> None:
    ours = replace(CTX, agent_comments=frozenset({41}))
    decision = classify_comment(reply("won't fix, @claude: it is intended"), "review", REPO, 3,
                                ours)
    assert decision == Decline(repo=REPO, pr_number=3, reply_to=41, by="bob")


def test_no_phrases_no_declines_and_conversation_comments_never_decline() -> None:
    quiet = replace(CTX, decline_phrases=())
    assert classify_comment(reply("won't fix"), "review", REPO, 3, quiet) == Ignore("no_mention")
    assert classify_comment(reply("won't fix"), "issue", REPO, 3, CTX) == Ignore("no_mention")


def test_an_edited_reply_never_declines() -> None:
    assert classify_comment(reply("won't fix"), "review", REPO, 3, CTX, edited=True) == (
        Ignore("comment_edited"))


# -- the ingest seam, on both backends ---------------------------------------------------------

def _remember(store: Database, now: datetime, *comment_ids: int) -> None:
    with store.transaction() as tx:
        posted_findings.remember(tx, REPO, 3, head_sha="a" * 40, now=now, posted=[
            PostedFinding(fingerprint=f"f{c}", path="a.py", line=c, severity="major",
                          category="correctness", comment_id=c) for c in comment_ids])


def _states(store: Database) -> dict[str, str]:
    with store.read() as tx:
        return {k.fingerprint: k.state for k in posted_findings.inline(tx, REPO, 3)}


def test_applying_a_decline_marks_only_the_apps_open_finding_it_answers(
        database: Database) -> None:
    store, now = database, T0
    _remember(store, now, 41, 42)
    decisions = [Decided(Decline(REPO, 3, 41, "bob"), now),
                 Decided(Decline(REPO, 3, 41, "alice"), now),   # settled already
                 Decided(Decline(REPO, 3, 500, "bob"), now),    # someone else's thread
                 Decided(Decline(REPO, 4, 42, "bob"), now)]     # another pull request
    with store.transaction() as tx:
        applied = apply_decisions(tx, decisions)
    assert [a.declined for a in applied] == [["f41"], [], [], []]
    assert _states(store) == {"f41": "declined", "f42": "open"}
    with store.read() as tx:  # the summary's count of open findings is now behind
        assert summaries.pending(tx, now, 10) == [(REPO, 3)]
        assert summaries.facts(tx, REPO, 3).open_findings == (("major", 1),)


# -- the poller's comment stream: a reply no webhook delivered -----------------------------------

def _app_finding(rig: PollerRig, line: int) -> ReviewComment:
    """One of the App's inline findings on pull request 1, as the publisher records it."""
    comment = rig.world.add_review_comment(REPO, 1, user=rig.world.app.bot, path="src/app.py",
                                           line=line, body=f"**[major] finding {line}**")
    with rig.store.transaction() as tx:
        posted_findings.remember(tx, REPO, 1, head_sha=rig.world.pull(REPO, 1).head.head_sha,
                                 now=rig.now(), posted=[PostedFinding(
                                     fingerprint=f"f{line}", path="src/app.py", line=line,
                                     severity="major", category="correctness",
                                     comment_id=comment.id)])
    return comment


def _poll_states(rig: PollerRig) -> dict[str, str]:
    with rig.store.read() as tx:
        return {k.fingerprint: k.state for k in posted_findings.inline(tx, REPO, 1)}


@pytest.mark.anyio
async def test_the_poller_reads_a_decline_that_no_webhook_delivered(rig: PollerRig) -> None:
    rig.open_pull(1, user="eve")  # the author is outside the allowlist
    first, second, third = (_app_finding(rig, line) for line in (2, 3, 4))
    rig.tick()
    assert (await rig.poll()).success  # cold start: the mark goes to the newest comment
    rig.tick()
    world = rig.world
    world.reply_to_review_comment(REPO, 1, first.id, user="bob", body="Won't fix: by design.")
    world.reply_to_review_comment(REPO, 1, second.id, user="eve", body="false positive")
    world.reply_to_review_comment(REPO, 1, third.id, user="bob", body="Good catch, fixing.")
    person = world.add_review_comment(REPO, 1, user="alice", path="src/app.py", line=2,
                                      body="typo here")
    world.reply_to_review_comment(REPO, 1, person.id, user="bob", body="won't fix")
    rig.tick()
    report = await rig.poll()
    assert report.success
    (repository,) = report.repositories
    assert repository.declined == ["f2"]
    # eve wrote the pull request, but a listing does not say so: her decline waits for the
    # next review, which reads the thread itself.
    assert _poll_states(rig) == {"f2": "declined", "f3": "open", "f4": "open"}
    assert rig.rows() == []  # a decline enqueues nothing
    rig.tick()
    assert (await rig.poll()).repositories[0].declined == []  # nothing moves twice


# -- the webhook: the payload names the pull request's author ------------------------------------

@pytest.mark.anyio
async def test_the_webhook_marks_a_decline_by_the_author_and_records_it(
        tmp_path: Path) -> None:
    async with open_env(tmp_path) as env:
        world = env.world
        world.add_user("eve", association="NONE")
        pull = world.add_pull(REPO, number=2, title="t", user="eve", head_sha="c" * 40,
                              base_sha="a" * 40, diff=SAMPLE_DIFF)
        root = world.add_review_comment(REPO, 2, user=world.app.bot, path="src/app.py",
                                        line=3, body="**[major] finding**")
        with env.store.transaction() as tx:
            posted_findings.remember(tx, REPO, 2, head_sha=pull.head.head_sha, now=NOW,
                                     posted=[PostedFinding("f3", "src/app.py", 3, "major",
                                                           "correctness", root.id)])
        world.events.clear()
        world.reply_to_review_comment(REPO, 2, root.id, user="eve", body="Won’t fix.",
                                      emit=True)
        world.reply_to_review_comment(REPO, 2, root.id, user="eve", body="won't fix",
                                      emit=True)  # a second decline: nothing left to move
        first, again = world.events
        assert (await env.sender.send_emitted(first)).status_code == 202
        assert (await env.sender.send_emitted(again)).status_code == 202
        outcomes = [env.delivery(e.delivery_id) for e in (first, again)]
        assert [o and o["outcome"] for o in outcomes] == [
            "declined:findings=1", "declined:findings=0"]
        with env.store.read() as tx:
            (known,) = posted_findings.inline(tx, REPO, 2)
        assert known.state == "declined"
