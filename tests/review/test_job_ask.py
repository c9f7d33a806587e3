"""Questions end to end through the worker and ``GitHubPublisher`` on the simulated GitHub:
``@claude ask`` in the conversation, and a reply in one of the App's own review threads,
each found by the webhook's rules and the poller's alike, answered once, where asked."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from service.config.schema import TriggersConfig
from service.engine.anthropic import AnthropicEngine
from service.intake.rules.classify import classify_comment, classify_event
from service.intake.rules.decisions import Enqueue, TriggerContext
from service.model.jobs import Job
from service.publish.github import GitHubPublisher
from service.publish.retry import republish_pending
from service.storage.agent_comments import AgentComments
from tests.simulator import push_to_pull
from tests.worker_helpers import APP_ID, REPO, Sim, build_sim, close_sim, github_publisher

CHANGED = {"src/app.py": "changed 1\n" + "".join(f"line {i}\n" for i in range(2, 21))}


def context(sim: Sim) -> TriggerContext:
    return TriggerContext(config=TriggersConfig(), app_id=APP_ID, app_slug="pr-reviewer",
                          agent_comments=AgentComments(sim.store),
                          decline_phrases=("won't fix",))


def both_paths(sim: Sim, event: str, payload: object, rest: dict[str, object],
               source: str, pr_number: int) -> Job:
    """The job the webhook's rules and the poller's make of one comment: the same."""
    ctx = context(sim)
    hooked = classify_event(event, payload, ctx)
    polled = classify_comment(rest, source, REPO, pr_number, ctx)  # type: ignore[arg-type]
    assert isinstance(hooked, Enqueue)
    assert hooked == polled
    return hooked.job


async def review_with_a_finding(sim: Sim, publisher: GitHubPublisher) -> tuple[int, int]:
    """A pull request the App reviewed, its finding posted inline: (number, comment id)."""
    pr = sim.open_pr(CHANGED)
    sim.enqueue_mention(pr)
    await sim.runner(publisher=publisher)(sim.claim())
    (inline,) = [c for c in sim.world.review_comments.values()
                 if c.pull_number == pr.number and c.user.login == "pr-reviewer[bot]"]
    return pr.number, inline.id


@pytest.mark.anyio
async def test_an_ask_in_the_conversation_is_answered_once_quoting_it(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        number, _ = await review_with_a_finding(sim, publisher)
        comment = sim.world.add_issue_comment(
            REPO, number, user="bob", body="@claude ask why does `line 1` change here?")
        rest = await sim.github.get_json(sim.installation_id,
                                         f"/repos/{REPO}/issues/comments/{comment.id}")
        job = both_paths(sim, "issue_comment",
                         sim.world.payloads.issue_comment("created", comment), rest, "issue",
                         number)
        assert (job.command, job.comment_source, job.dedupe_key) == (
            "ask", "issue", f"mention:{REPO}:{number}:{comment.id}")
        assert sim.queue.enqueue(job, now=sim.now())
        assert not sim.queue.enqueue(job, now=sim.now())  # the other path: a no-op
        before = len(sim.engine.requests)

        await sim.runner(publisher=publisher)(sim.claim())

        (request,) = sim.engine.requests[before:]
        assert request.command == "ask" and request.question is not None
        assert request.question.text == "@claude ask why does `line 1` change here?"
        assert request.question.asker == "bob" and request.question.thread == ()
        assert [line.split(" [")[0] for line in request.question.findings] == ["src/app.py:1"]
        assert "src/app.py" in request.diff  # the whole pull request's diff
        assert [r.content for r in sim.world.issue_comments[comment.id].reactions] == ["eyes"]
        answers = [c for c in sim.world.issue_comments.values() if c.issue_number == number
                   and c.user.login == "pr-reviewer[bot]" and f":{comment.id} -->" in c.body]
        (answer,) = answers
        assert "@bob asked:\n\n> @\u2060claude ask why does `line 1` change here?" in answer.body
        assert "read before it is checked" in answer.body
        assert "answer" in answer.body.rsplit("<sub>", 1)[1]  # its account names the kind
        row = sim.run_row(job.dedupe_key)
        assert row is not None and row["publish_outcome"] == "published"
        assert json.loads(row["answer"])["reply_to"] is None
        [ledger] = sim.ledger(job.dedupe_key)
        assert ledger["reviewed_lines"] is None  # an answer does not teach the estimator
        with sim.store.read() as tx:
            assert tx.execute("SELECT COUNT(*) FROM checks WHERE dedupe_key = ?",
                              (job.dedupe_key,)).fetchone() == (0,)
        # A second publication attempt finds the answer by its marker and posts nothing.
        sim.world.clock.advance(600)
        assert await republish_pending(sim.store, publisher, sim.now()) == 0
        assert len([c for c in sim.world.issue_comments.values()
                    if f":{comment.id} -->" in c.body]) == 1
    finally:
        await close_sim(sim)


@pytest.mark.anyio
async def test_a_reply_in_a_findings_thread_is_answered_in_that_thread(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        number, finding = await review_with_a_finding(sim, publisher)
        sim.world.reply_to_review_comment(REPO, number, finding, user="alice",
                                          body="I think it is fine.")
        reply = sim.world.reply_to_review_comment(
            REPO, number, finding, user="bob", body="Does this also apply to line 2, @claude?")
        rest = await sim.github.get_json(sim.installation_id,
                                         f"/repos/{REPO}/pulls/comments/{reply.id}")
        job = both_paths(sim, "pull_request_review_comment",
                         sim.world.payloads.pull_request_review_comment("created", reply), rest,
                         "review", number)
        assert (job.command, job.comment_source) == ("ask", "review")
        assert sim.queue.enqueue(job, now=sim.now())
        before = len(sim.engine.requests)

        await sim.runner(publisher=publisher)(sim.claim())

        (request,) = sim.engine.requests[before:]
        question = request.question
        assert question is not None
        assert [who for who, _ in question.thread] == ["pr-reviewer[bot]", "alice"]
        assert "Check this" in question.thread[0][1]  # the finding itself
        assert question.lines is not None and question.lines.startswith("src/app.py:1\n@@")
        (answer,) = [c for c in sim.world.review_comments.values()
                     if c.in_reply_to_id == finding and c.user.login == "pr-reviewer[bot]"]
        assert "@bob asked:" in answer.body and "line 2" in answer.body
        assert answer.app_id == APP_ID
        assert not [c for c in sim.world.issue_comments.values()
                    if f":{reply.id} -->" in c.body]  # not in the conversation
        row = sim.run_row(job.dedupe_key)
        assert row is not None and json.loads(row["answer"])["reply_to"] == finding
        # The answer is the App's own comment: a reply to it that names the App is a new
        # question, the answer itself never one.
        answer_rest = await sim.github.get_json(sim.installation_id,
                                                f"/repos/{REPO}/pulls/comments/{answer.id}")
        ignored = classify_comment(answer_rest, "review", REPO, number, context(sim))
        assert getattr(ignored, "reason", None) == "own_comment"
        # Found again by its marker among the thread's replies: nothing posted twice.
        sim.world.clock.advance(600)
        await publisher.publish_key(job.dedupe_key)
        assert len([c for c in sim.world.review_comments.values()
                    if c.in_reply_to_id == finding and c.user.login == "pr-reviewer[bot]"]) == 1
    finally:
        await close_sim(sim)


@pytest.mark.anyio
async def test_a_decline_in_the_thread_is_not_answered(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        number, finding = await review_with_a_finding(sim, publisher)
        reply = sim.world.reply_to_review_comment(
            REPO, number, finding, user="bob", body="won't fix, @claude: it is intended")
        rest = await sim.github.get_json(sim.installation_id,
                                         f"/repos/{REPO}/pulls/comments/{reply.id}")
        decided = classify_comment(rest, "review", REPO, number, context(sim))
        assert type(decided).__name__ == "Decline"
        assert getattr(decided, "reply_to", None) == finding
    finally:
        await close_sim(sim)


@pytest.mark.anyio
async def test_an_answer_for_a_head_that_moved_says_so(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        pr = sim.open_pr(CHANGED)
        key, _ = sim.enqueue_mention(pr, command="ask", body="@claude ask is this safe?")
        asked_on = pr.head.head_sha
        # The first post fails; before the retry, the author pushes a new head.
        sim.world.faults.add(method="POST", path_glob="*/issues/*/comments", status=502,
                             times=1)
        await sim.runner(publisher=publisher)(sim.claim())
        push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/app.py": "pushed\n"})
        sim.world.clock.advance(600)
        assert await republish_pending(sim.store, publisher, sim.now()) == 1
        (answer,) = [c for c in sim.world.issue_comments.values() if f":{key.rsplit(':', 1)[1]}"
                     in c.body and c.user.login == "pr-reviewer[bot]"]
        now = sim.world.pull(REPO, pr.number).head.head_sha
        assert now != asked_on
        assert f"Answered for `{asked_on[:12]}`" in answer.body
        assert f"moved on to `{now[:12]}` since" in answer.body
        row = sim.run_row(key)
        assert row is not None and row["publish_outcome"] == "published"
    finally:
        await close_sim(sim)


@pytest.mark.anyio
async def test_an_ask_whose_comment_is_gone_is_not_answered(tmp_path: Path) -> None:
    sim = build_sim(tmp_path)
    try:
        publisher = github_publisher(sim)
        pr = sim.open_pr(CHANGED)
        key, comment_id = sim.enqueue_mention(pr, command="ask", body="@claude ask what?")
        del sim.world.issue_comments[comment_id]
        await sim.runner(publisher=publisher)(sim.claim())
        assert sim.engine.requests == [] and sim.status(key) == "done"
        [row] = sim.ledger(key)
        assert (row["stop_reason"], row["used_tokens"]) == ("refused", 0)
        assert not [c for c in sim.world.issue_comments.values()
                    if c.user.login == "pr-reviewer[bot]"]
    finally:
        await close_sim(sim)


@pytest.mark.anyio
async def test_a_thread_question_through_the_messages_api_end_to_end(tmp_path: Path) -> None:
    # The HTTP engines answer from the context the worker gives them: the question, its
    # thread and the lines, the open findings and the diff, sized to the model's window.
    sim = build_sim(tmp_path)
    sent: list[dict[str, object]] = []

    def api(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path.endswith("/count_tokens"):
            return httpx.Response(200, json={"input_tokens": len(request.content) // 4})
        sent.append(body)
        return httpx.Response(200, json={
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x-1",
            "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": 900, "output_tokens": 60},
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "submit_answer",
                         "input": {"answer": "Yes: line 2 is read the same way."}}]})

    try:
        publisher = github_publisher(sim)
        number, finding = await review_with_a_finding(sim, publisher)
        reply = sim.world.reply_to_review_comment(
            REPO, number, finding, user="bob", body="Does this apply to line 2 too, @claude?")
        rest = await sim.github.get_json(sim.installation_id,
                                         f"/repos/{REPO}/pulls/comments/{reply.id}")
        decided = classify_comment(rest, "review", REPO, number, context(sim))
        assert isinstance(decided, Enqueue) and decided.job.command == "ask"
        assert sim.queue.enqueue(decided.job, now=sim.now())
        sim.engine = AnthropicEngine(model="claude-x-1", environ={"ANTHROPIC_API_KEY": "k"},
                                     transport=httpx.MockTransport(api),
                                     clock=sim.world.clock.now, context_tokens=200_000)

        await sim.runner(publisher=publisher)(sim.claim())

        (call,) = sent
        assert call["tool_choice"] == {"type": "tool", "name": "submit_answer",
                                       "disable_parallel_tool_use": True}
        prompt = str(call["messages"][0]["content"])  # type: ignore[index]
        assert "<question>\nDoes this apply to line 2 too, @claude?\n</question>" in prompt
        assert "<review_thread>\npr-reviewer[bot] wrote:" in prompt
        assert "<commented_lines>\nsrc/app.py:1" in prompt and "<diff>" in prompt
        (answer,) = [c for c in sim.world.review_comments.values()
                     if c.in_reply_to_id == finding and c.user.login == "pr-reviewer[bot]"]
        assert "Yes: line 2 is read the same way." in answer.body
        assert "`anthropic`" in answer.body and "960 tokens" in answer.body
        [row] = sim.ledger(decided.job.dedupe_key)
        assert (row["engine"], row["used_tokens"], row["stop_reason"]) == (
            "anthropic", 960, "completed")
    finally:
        await close_sim(sim)
