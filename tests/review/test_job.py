"""One job end to end: a real store, queue and governor, the GitHub simulator with a real
git repository behind it, a fake engine and a recording publisher."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

import pytest

from service.engine.base import EngineRequest, EngineResult
from service.engine.prompt import build_prompt
from service.publish.run import RecordedRun
from service.review.checkout import GitRunner, auth_header
from service.review.installations import Installations
from service.review.job import JobRunner
from tests.simulator import open_pull, push_to_pull
from tests.worker_helpers import (
    OWNER,
    REPO,
    Sim,
    budget,
    build_sim,
    close_sim,
    contains_bytes,
    files_under,
    worker_sim,
)

__all__ = ["worker_sim"]  # the ``sim`` fixture


def _reactions(sim: Sim, number: int) -> list[str]:
    return [r.content for r in sim.world.issue(REPO, number).reactions]


# -- the happy path ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_happy_path_acks_reviews_records_settles_then_publishes(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "changed\n" + BASE_TAIL, "REVIEW.md": "Head rules!\n"})
    key = sim.enqueue_opened(pr)
    seen_at_publish: dict[str, object] = {}

    async def on_publish(run: RecordedRun) -> None:
        # Everything is committed before the publisher is asked.
        seen_at_publish["run"] = sim.run_row(key)
        seen_at_publish["ledger"] = sim.ledger(key)
        seen_at_publish["status"] = sim.status(key)

    sim.publisher._on_publish = on_publish
    worktree_content: list[str] = []

    async def hook(request: EngineRequest) -> None:
        worktree_content.append((request.workdir / "src/app.py").read_text())

    sim.engine.hook = hook
    claim = sim.claim()
    await sim.runner()(claim)

    assert _reactions(sim, pr.number) == ["eyes"]
    [request] = sim.engine.requests
    assert request.diff == pr.head.diff  # merge-base...head, as GitHub shows it
    assert request.changed_paths == ("REVIEW.md", "src/app.py")
    assert request.guidelines == "Base rules: check error handling.\n"  # base, not head
    assert request.head_sha == pr.head.head_sha and request.base_sha == sim.base_sha
    assert request.reviewed_since is None and request.mode == "full"
    assert request.max_run_tokens == 10_000 and request.max_turns == 5
    assert worktree_content == ["changed\n" + BASE_TAIL]
    assert not request.workdir.exists()
    assert files_under(sim.checkouts.worktrees) == []

    run = seen_at_publish["run"]
    assert isinstance(run, dict)
    assert run["outcome"] == "completed" and run["head_sha"] == pr.head.head_sha
    assert json.loads(run["findings"])[0]["path"] == "REVIEW.md"
    assert json.loads(run["assessment"]) == {"summary": "Mostly fine.", "risk": "low"}
    assert run["description"] is None and json.loads(run["omitted"]) == []
    [row] = seen_at_publish["ledger"]  # type: ignore[misc]
    assert row["settled_at"] is not None and row["used_tokens"] == 1234
    assert (row["usage_confidence"], row["engine"], row["model"]) == ("exact", "fake", "fake-1")
    assert row["stop_reason"] == "completed"
    assert row["reviewed_lines"] == len(request.diff.splitlines())
    assert row["reviewed_since"] is None
    assert seen_at_publish["status"] == "done"
    [published] = sim.publisher.runs
    assert published.outcome == "completed" and published.claim == claim


BASE_TAIL = "".join(f"line {i}\n" for i in range(2, 21))


@pytest.mark.anyio
async def test_mention_acks_the_comment_and_reviews_the_current_head(sim: Sim) -> None:
    pr = sim.open_pr({"src/new.py": "x = 1\n"})
    push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/more.py": "y = 2\n"})
    key, comment_id = sim.enqueue_mention(pr)
    await sim.runner()(sim.claim())

    assert [r.content for r in sim.world.issue_comments[comment_id].reactions] == ["eyes"]
    assert _reactions(sim, pr.number) == []
    [request] = sim.engine.requests
    assert request.head_sha == pr.head.head_sha
    assert set(request.changed_paths) == {"src/new.py", "src/more.py"}
    assert sim.ledger(key)[0]["stop_reason"] == "completed"


@pytest.mark.anyio
async def test_describe_records_a_description(sim: Sim) -> None:
    pr = sim.open_pr({"src/new.py": "x = 1\n"})
    key, _ = sim.enqueue_mention(pr, command="describe")
    await sim.runner()(sim.claim())
    assert sim.engine.requests[0].command == "describe"
    run = sim.run_row(key)
    assert run is not None and run["assessment"] is None
    assert json.loads(run["description"]) == {"title": "A title", "summary": "What it does.",
                                              "changes": ["one change"]}


# -- the token ------------------------------------------------------------------------------


def _git_wrapper(tmp: Path) -> tuple[Path, Path]:
    """A ``git`` that logs its argv and environment, then runs the real git."""
    log = tmp / "git-calls.log"
    real = shutil.which("git")
    assert real is not None
    script = tmp / "git-wrapper"
    script.write_text(
        "#!/bin/sh\n"
        f"{{ printf 'ARGV'; for a in \"$@\"; do printf ' %s' \"$a\"; done; printf '\\n';"
        f" env | sed 's/^/ENV /'; printf 'END\\n'; }} >> '{log}'\n"
        f"exec '{real}' \"$@\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


@pytest.mark.anyio
async def test_the_token_reaches_git_alone(tmp_path: Path) -> None:
    wrapper, log = _git_wrapper(tmp_path)
    sim = build_sim(tmp_path / "sim", git=GitRunner(executable=str(wrapper)))
    try:
        token = await sim.github.installation_token(sim.installation_id)
        header = auth_header(token)
        pr = sim.open_pr({"src/app.py": "changed\n"})
        sim.enqueue_opened(pr)
        found_in_worktree: list[Path] = []

        async def hook(request: EngineRequest) -> None:
            found_in_worktree.extend(contains_bytes(request.workdir, token.encode()))
            assert files_under(request.workdir)  # the scan did look at something
            assert token not in repr(request)

        sim.engine.hook = hook
        await sim.runner()(sim.claim())
        assert sim.engine.requests, "the engine ran"
    finally:
        await close_sim(sim)

    assert found_in_worktree == []
    [engine_env] = sim.engine.environments
    assert all(token not in v and header not in v for v in engine_env.values())
    for needle in (token.encode(), header.encode()):
        assert contains_bytes(sim.checkouts.root, needle) == []

    calls = log.read_text().split("END\n")[:-1]
    assert len(calls) > 4
    fetches = [c for c in calls if re.match(r"ARGV (--git-dir=\S+ )?fetch ", c)]
    assert len(fetches) == 1
    for call in calls:
        argv = call.splitlines()[0]
        assert token not in argv and "x-access-token" not in argv
        env_with_token = [line for line in call.splitlines()[1:] if header in line]
        if call in fetches:
            assert env_with_token == [f"ENV GIT_CONFIG_VALUE_0={header}"]
        else:
            assert env_with_token == []
        assert token not in call.replace(header, "")


# -- incremental and force-push -------------------------------------------------------------


@pytest.mark.anyio
async def test_a_new_head_is_reviewed_from_the_last_completed_head(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "first\n"})
    first = pr.head.head_sha
    sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    second = push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/new.py": "n = 1\n"})
    key = sim.enqueue_opened(pr, second.head_sha)
    await sim.runner()(sim.claim())

    request = sim.engine.requests[1]
    assert request.reviewed_since == first
    assert request.changed_paths == ("src/new.py",)
    assert "src/app.py" not in request.diff
    [row] = sim.ledger(key)
    assert row["reviewed_since"] == first and row["stop_reason"] == "completed"


@pytest.mark.anyio
async def test_a_force_push_falls_back_to_a_full_review(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "first\n"})
    sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    rewritten = push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/other.py": "o\n"},
                             force=True)
    key = sim.enqueue_opened(pr, rewritten.head_sha)
    await sim.runner()(sim.claim())

    request = sim.engine.requests[1]
    assert request.reviewed_since is None
    assert request.diff == sim.git.diff(sim.base_sha, rewritten.head_sha)
    assert sim.ledger(key)[0]["reviewed_since"] is None


@pytest.mark.anyio
async def test_a_mention_after_a_review_still_reviews_everything(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "first\n"})
    sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    push_to_pull(sim.world, REPO, pr.number, sim.git, {"src/new.py": "n = 1\n"})
    sim.enqueue_mention(pr)
    await sim.runner()(sim.claim())
    assert sim.engine.requests[1].reviewed_since is None
    assert set(sim.engine.requests[1].changed_paths) == {"src/app.py", "src/new.py"}


@pytest.mark.anyio
async def test_a_base_sha_gone_after_a_base_force_push_diffs_against_the_tip(sim: Sim) -> None:
    sim.git.commit({"src/feature.py": "f = 1\n"}, parent=sim.base_sha, branch="topic")
    moved = sim.git.commit({"CHANGELOG.md": "c\n"}, parent=sim.base_sha, branch="main")
    pr = open_pull(sim.world, REPO, sim.git, base_ref="main", head_ref="topic", title="T",
                   user="alice", emit=False)
    assert pr.head.base_sha == moved
    rewritten = sim.git.commit({"NOTES.md": "n\n"}, parent=sim.base_sha, branch="main")
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    [request] = sim.engine.requests
    assert request.base_sha == rewritten
    assert request.changed_paths == ("src/feature.py",)
    assert sim.ledger(key)[0]["stop_reason"] == "completed"


# -- layer 2 ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_excluded_paths_are_withheld_and_recorded(sim: Sim) -> None:
    pr = sim.open_pr({"yarn.lock": "lock\n" * 50, "third/vendor/lib/x.go": "package x\n",
                      "src/a.py": "a = 1\n"})
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())
    [request] = sim.engine.requests
    assert request.changed_paths == ("src/a.py",)
    assert "yarn.lock" not in request.diff and "vendor" not in request.diff
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "completed"
    omitted = {o["path"]: o for o in json.loads(run["omitted"])}
    assert omitted["yarn.lock"]["pattern"] == "*.lock"
    assert omitted["yarn.lock"]["reason"] == "excluded" and omitted["yarn.lock"]["lines"] > 50
    assert omitted["third/vendor/lib/x.go"]["pattern"] == "**/vendor/**"
    assert sim.ledger(key)[0]["reviewed_lines"] == len(request.diff.splitlines())


@pytest.mark.anyio
async def test_a_diff_over_the_line_cap_is_reviewed_in_part_and_marked_truncated(
        sim: Sim) -> None:
    pr = sim.open_pr({"big.txt": "x\n" * 400, "small.py": "s = 1\n"})
    key = sim.enqueue_opened(pr)
    await sim.runner(sim.configured(review={"max_diff_lines": 100}))(sim.claim())
    [request] = sim.engine.requests
    assert request.changed_paths == ("small.py",)
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "truncated"
    [omitted] = json.loads(run["omitted"])
    assert omitted["path"] == "big.txt" and omitted["reason"] == "max_diff_lines"
    assert sim.ledger(key)[0]["stop_reason"] == "completed"  # the engine itself completed


@pytest.mark.anyio
async def test_the_preflight_estimate_refuses_what_cannot_fit(tmp_path: Path) -> None:
    sim = build_sim(tmp_path, config=budget(max_run_tokens=300))
    try:
        pr = sim.open_pr({"src/big.py": "b = 1\n" * 60})
        key = sim.enqueue_opened(pr)
        # The fake prices the diff at about 200 tokens, and keeps 200 for the answer.
        await sim.runner()(sim.claim())
        assert sim.engine.requests == []
        [row] = sim.ledger(key)
        assert (row["used_tokens"], row["usage_confidence"], row["stop_reason"]) == (
            0, "exact", "refused")
        assert row["reviewed_lines"] is None
        assert sim.run_row(key) is None and sim.status(key) == "done"
        assert files_under(sim.checkouts.worktrees) == []
    finally:
        await close_sim(sim)


# -- endings before the engine --------------------------------------------------------------


@pytest.mark.anyio
async def test_a_closed_pull_request_settles_zero_as_closed(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    claim = sim.claim()
    sim.world.close(REPO, pr.number, merged=True)
    await sim.runner()(claim)
    assert sim.engine.requests == [] and sim.publisher.runs == []
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["usage_confidence"], row["stop_reason"]) == (
        0, "exact", "closed")
    assert sim.status(key) == "done" and sim.run_row(key) is None


# -- leases ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_lease_lost_during_the_run_records_and_publishes_nothing(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)

    async def lose_the_lease(request: EngineRequest) -> None:
        sim.world.clock.advance(sim.queue.lease.total_seconds() + 60)
        sim.claim(owner="other:2:0")  # closes our reservation as lost

    sim.engine.hook = lose_the_lease
    await sim.runner()(sim.claim())

    assert len(sim.engine.requests) == 1
    assert sim.run_row(key) is None and sim.publisher.runs == []
    lost, current = sim.ledger(key)
    assert (lost["owner"], lost["stop_reason"], lost["usage_confidence"]) == (
        OWNER, "lost", "unavailable")
    assert current["owner"] == "other:2:0" and current["settled_at"] is None
    row = sim.queue.get(key)
    assert row is not None and (row.status, row.owner) == ("claimed", "other:2:0")


@pytest.mark.anyio
async def test_a_lease_lost_before_the_job_starts_does_nothing(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    stale = sim.claim()
    sim.world.clock.advance(sim.queue.lease.total_seconds() + 60)
    sim.claim(owner="other:2:0")
    await sim.runner()(stale)
    assert sim.publisher.acks == [] and sim.engine.requests == []
    assert [r["stop_reason"] for r in sim.ledger(key)] == ["lost", None]


# -- failures -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_an_engine_that_raises_is_an_engine_error_charged_in_full(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)

    def explode(request: EngineRequest) -> EngineResult:
        raise RuntimeError("engine bug")

    sim.engine.answer = explode
    await sim.runner()(sim.claim())
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["usage_confidence"], row["stop_reason"]) == (
        10_000, "unavailable", "engine_error")
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "failed"
    assert sim.status(key) == "done" and files_under(sim.checkouts.worktrees) == []


@pytest.mark.anyio
async def test_a_failure_before_the_engine_settles_zero_and_releases(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    sim.world.faults.add(method="GET", path_glob=f"/repos/{REPO}/pulls/{pr.number}",
                         status=404, times=1)
    await sim.runner()(sim.claim())
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["usage_confidence"], row["stop_reason"]) == (
        0, "exact", "infrastructure")
    queued = sim.queue.get(key)
    assert queued is not None and (queued.status, queued.attempts) == ("pending", 1)

    sim.world.clock.advance(61)  # a failed attempt waits a minute before the next one
    await sim.runner()(sim.claim())  # the next attempt succeeds
    assert [r["stop_reason"] for r in sim.ledger(key)] == ["infrastructure", "completed"]
    assert sim.status(key) == "done"


@pytest.mark.anyio
async def test_a_failure_after_the_engine_charges_its_usage_and_releases(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    with sim.store.transaction() as conn:  # a stray row makes recording the run fail
        conn.execute("INSERT INTO runs (dedupe_key, repo, pr_number, head_sha, outcome,"
                     " findings, recorded_at) VALUES (?, ?, ?, 'x', 'failed', '[]',"
                     " '2026-01-01T00:00:00.000000+00:00')", (key, REPO, pr.number))
    await sim.runner()(sim.claim())
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["usage_confidence"], row["stop_reason"]) == (
        1234, "exact", "infrastructure")
    assert sim.status(key) == "pending" and sim.publisher.runs == []
    assert files_under(sim.checkouts.worktrees) == []


@pytest.mark.anyio
async def test_a_failed_ack_is_not_fatal(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    sim.world.faults.add(method="POST", path_glob="*/reactions", status=403, times=1)
    await sim.runner()(sim.claim())
    assert sim.ledger(key)[0]["stop_reason"] == "completed" and sim.status(key) == "done"


@pytest.mark.anyio
async def test_the_engine_is_asked_within_the_operators_config(sim: Sim) -> None:
    pr = sim.open_pr({"src/app.py": "x\n", "web/app.min.js": "y\n"})
    sim.enqueue_opened(pr)
    config = sim.configured(engine={"max_turns": 7, "wall_clock_seconds": 99},
                            review={"excluded_paths": ("*.min.js",)})
    await sim.runner(config)(sim.claim())
    [request] = sim.engine.requests
    assert (request.max_turns, request.wall_clock_seconds) == (7, 99.0)
    assert list(request.changed_paths) == ["src/app.py"]


@pytest.mark.anyio
async def test_an_engine_that_cannot_start_does_not_use_up_the_head(sim: Sim) -> None:
    # claude not installed, or not logged in: nothing ran, nothing was spent. The row
    # waits for the engine like it waits out a GitHub outage; /healthz says so meanwhile.
    from service.engine.base import no_usage
    from service.observe.health import Health

    health = Health(sim.store)
    health.workers_started(["w"])
    pr = sim.open_pr({"src/app.py": "x\n"})
    key = sim.enqueue_opened(pr)
    sim.engine.answer = lambda request: EngineResult(
        usage=no_usage("fake", None), stop_reason="engine_unavailable",
        detail="'claude' was not found or is not executable")
    runner = JobRunner(
        store=sim.store, leasing=sim.queue.leasing, governor=sim.governor, github=sim.github,
        installations=Installations(sim.store, sim.github), checkouts=sim.checkouts,
        engine=sim.engine, publisher=sim.publisher, clock=sim.world.clock.now,
        config=sim.config, tuning=sim.tuning, health=health)
    await runner(sim.claim())
    [row] = sim.ledger(key)
    assert (row["used_tokens"], row["stop_reason"]) == (0, "engine_unavailable")
    queued = sim.queue.get(key)
    assert queued is not None and (queued.status, queued.attempts) == ("pending", 1)
    assert sim.run_row(key) is None and sim.publisher.runs == []
    engine = health.report(sim.now())["checks"]["engine"]  # type: ignore[index]
    assert engine["status"] == "failing" and "not found" in engine["last_failure"]
    assert health.report(sim.now())["status"] == "degraded"  # webhooks are still taken

    sim.engine.answer = sim.engine.completed  # installed now
    sim.world.clock.advance(61)
    await runner(sim.claim())
    assert [r["stop_reason"] for r in sim.ledger(key)] == ["engine_unavailable", "completed"]
    assert sim.status(key) == "done"
    assert health.report(sim.now())["checks"]["engine"]["status"] == "ok"  # type: ignore[index]


# -- sized to the window ------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_pull_request_over_the_window_is_reviewed_in_parts_within_one_reservation(
        sim: Sim) -> None:
    sim.engine.window = 2_500  # each file fits a call; two together do not
    files = {f"src/m{i}.py": "".join(f"value_{i}_{n} = {n}\n" for n in range(300))
             for i in range(3)}
    pr = sim.open_pr(files)
    key = sim.enqueue_opened(pr)
    await sim.runner()(sim.claim())

    parts = [r.part for r in sim.engine.requests]
    assert parts == ["part 1 of 3", "part 2 of 3", "part 3 of 3"]
    assert [r.changed_paths for r in sim.engine.requests] == [(p,) for p in sorted(files)]
    assert "reviewed in parts: this is part 2 of 3" in build_prompt(sim.engine.requests[1])
    # Each part was given what was left of the one reservation, less what the parts after
    # it needed: together they can never spend more than it.
    first = sim.engine.requests[0].max_run_tokens
    assert first < sim.config.budget.max_run_tokens
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "completed"
    assert json.loads(run["coverage"]) == {"files": 3, "reviewed": 3, "parts": 3,
                                           "pruned": []}
    assert sorted(f["path"] for f in json.loads(run["findings"])) == sorted(files)
    [row] = sim.ledger(key)
    assert row["used_tokens"] == 3 * sim.engine.tokens
    assert 0 < row["estimated_tokens"] <= sim.config.budget.max_run_tokens


@pytest.mark.anyio
async def test_a_part_the_model_refused_as_over_its_window_is_named_not_hidden(
        sim: Sim) -> None:
    sim.engine.window = 2_500
    files = {f"src/m{i}.py": "".join(f"value_{i}_{n} = {n}\n" for n in range(300))
             for i in range(2)}
    answer = sim.engine.answer

    def second_refused(request: EngineRequest) -> EngineResult:
        if request.part == "part 2 of 2":  # the server's window was smaller than said
            return EngineResult(usage=sim.engine.usage(), stop_reason="refused",
                                over_window=True, detail="over the model's context window")
        return answer(request)

    sim.engine.answer = second_refused
    key = sim.enqueue_opened(sim.open_pr(files))
    await sim.runner()(sim.claim())
    run = sim.run_row(key)
    assert run is not None and run["outcome"] == "truncated"
    assert [(o["path"], o["reason"]) for o in json.loads(run["omitted"])] == [
        ("src/m1.py", "over_window")]
    assert json.loads(run["coverage"])["reviewed"] == 1
    [row] = sim.ledger(key)
    assert row["stop_reason"] == "completed"
