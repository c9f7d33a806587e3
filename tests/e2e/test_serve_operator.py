"""The operator commands against the simulator: ``review`` (one review now, through the
same queue, governor, ledger and publisher as ``serve``) and ``replay`` (a signed
delivery with GitHub's headers)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from service.cli.local_review import review_once
from service.cli.replay import replay, replay_url
from service.config.strict_yaml import load_config
from service.github.webhooks import check_signature
from tests.e2e.conftest import E2E
from tests.e2e.harness import (
    CREDENTIAL_SHAPES,
    PR,
    REPO,
    RUN_TOKENS,
    WEBHOOK_SECRET,
    review_steps,
    started_calls,
)
from tests.kit.paths import CHECKOUT as ROOT
from tests.kit.waiting import wait_for


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m service ARGV`` (the ``pr-review-agent`` command), its output captured."""
    return subprocess.run([sys.executable, "-m", "service", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_review_runs_one_review_now_and_not_twice_for_one_head(e2e: E2E) -> None:
    config = str(e2e.configure())
    key = f"pr_opened:{REPO}:{PR}:{e2e.sim.seeded.head_sha}"

    done = cli("review", "--config", config, "--repo", REPO, "--pr", str(PR))
    assert done.returncode == 0, done.stderr
    [review] = e2e.sim.reviews()
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    assert review["commit_id"] == e2e.sim.seeded.head_sha
    assert len(e2e.sim.reactions()) == 1  # 👀, as a worker would leave
    lines = done.stdout.splitlines()
    assert lines[0] == f"{REPO}#{PR} at {e2e.sim.seeded.head_sha}: {key}"
    assert f"ledger: completed, {RUN_TOKENS} tokens (exact); 50000 reserved, mode full" in lines
    assert f"publication: published (id {review['id']})" in lines
    assert "queue: done after 1 attempt(s)" in lines
    assert "operator review claimed" in done.stderr  # its log, readable text by default
    assert WEBHOOK_SECRET not in done.stderr
    assert not any(shape.search(done.stderr + done.stdout) for shape in CREDENTIAL_SHAPES)

    again = cli("review", "--config", config, "--repo", REPO, "--pr", str(PR))
    assert again.returncode == 0, again.stderr
    assert "already reviewed at this head; not reviewing it again" in again.stdout
    assert len(e2e.sim.reviews()) == 1
    assert e2e.scenario is not None and e2e.scenario.calls == 1
    assert e2e.db("SELECT COUNT(*) FROM ledger") == [(1,)]


def test_review_without_claude_installed_does_not_use_up_the_head(e2e: E2E) -> None:
    # A new user's first try, before installing the CLI: nothing ran, nothing was spent,
    # and the head is still to be reviewed (not "already reviewed").
    config = str(e2e.configure(engine={"command": "/nonexistent/claude"}))
    key = f"pr_opened:{REPO}:{PR}:{e2e.sim.seeded.head_sha}"

    first = cli("review", "--config", config, "--repo", REPO, "--pr", str(PR))
    assert first.returncode == 1, first.stdout + first.stderr
    assert "queue: pending after 1 attempt(s)" in first.stderr
    assert e2e.db("SELECT stop_reason, used_tokens FROM ledger") == [("engine_unavailable", 0)]
    assert e2e.db("SELECT COUNT(*) FROM runs") == [(0,)] and e2e.sim.reviews() == []

    again = cli("review", "--config", config, "--repo", REPO, "--pr", str(PR))
    assert again.returncode == 1
    assert "already reviewed" not in again.stdout + again.stderr
    assert "attempt 1 failed; it is tried again from" in again.stderr
    assert e2e.db("SELECT status FROM queue WHERE dedupe_key = ?", key) == [("pending",)]


def test_review_dry_run_records_without_posting_and_can_be_posted_later(e2e: E2E) -> None:
    config = str(e2e.configure())
    key = f"pr_opened:{REPO}:{PR}:{e2e.sim.seeded.head_sha}"

    dry = cli("review", "--config", config, "--repo", REPO, "--pr", str(PR), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "(dry run: nothing posted)" in dry.stdout.splitlines()[0]
    assert "publication: dry_run" in dry.stdout
    assert e2e.sim.reviews() == [] and e2e.sim.reactions() == []
    assert all(r["path"].endswith("/access_tokens") for r in e2e.sim.requests("POST"))
    assert e2e.db("SELECT publish_outcome FROM runs WHERE dedupe_key = ?", key) == [
        ("dry_run",)]
    assert e2e.db("SELECT stop_reason FROM ledger") == [("completed",)]  # it was paid for

    # docs/OPERATIONS.md: clearing the outcome offers the run again; serve's re-offer loop
    # runs at start and posts it, once, without running the engine again.
    e2e.db("UPDATE runs SET publish_outcome = NULL, published_at = NULL"
           " WHERE dedupe_key = ?", key)
    serve = e2e.serve()
    [review] = wait_for("the recorded review to be posted", e2e.sim.reviews,
                        alive=serve.alive, on_timeout=serve.text)
    assert f"<!-- pr-review-agent:{key} -->" in review["body"]
    assert e2e.scenario is not None and e2e.scenario.calls == 1
    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0
    assert len(e2e.sim.reviews()) == 1


def test_review_goes_through_the_budget(e2e: E2E) -> None:
    config = str(e2e.configure(budget={"enabled": False}))
    refused = cli("review", "--config", config, "--repo", REPO, "--pr", str(PR))
    assert refused.returncode == 1
    assert "the budget refused it (disabled); nothing was spent" in refused.stderr
    assert e2e.db("SELECT COUNT(*) FROM ledger") == [(0,)]
    # The row stays queued for the daemon, as any refused row does.
    assert e2e.db("SELECT status, attempts FROM queue") == [("pending", 0)]
    assert e2e.sim.reviews() == [] and e2e.sim.reactions() == []


@pytest.mark.anyio
async def test_review_refuses_a_closed_pull_request_and_a_repository_not_configured(
        make_e2e: Callable[..., E2E]) -> None:
    e2e = make_e2e(pr_state="closed")
    config = load_config(e2e.configure(), {})
    closed = await review_once(config, REPO, PR, dry_run=False, environ={})
    assert (closed.ok, closed.ran, closed.lines) == (
        False, False, (f"{REPO}#{PR} is closed; nothing to review",))
    missing = await review_once(config, REPO, 7, dry_run=False, environ={})
    assert missing.lines == (f"{REPO}#7: no such pull request",)
    elsewhere = load_config(e2e.configure(github={"repositories": ["acme/other"]}), {})
    outside = await review_once(elsewhere, REPO, PR, dry_run=False, environ={})
    assert outside.lines == (f"{REPO} is not in github.repositories; this agent does not "
                             "review it",)
    assert e2e.db("SELECT COUNT(*) FROM queue") == [(0,)]


def test_replay_posts_a_signed_delivery_to_the_running_server(e2e: E2E, tmp_path: Path) -> None:
    config = e2e.configure(triggers={"auto_review": False})
    serve = e2e.serve()
    serve.wait_ready(polled=False)
    payload = tmp_path / "opened.json"
    payload.write_text(json.dumps(e2e.sim.pull_request_payload("opened"), indent=2))

    sent = cli("replay", "--config", str(config), "--event", "pull_request", str(payload))
    assert sent.returncode == 0, sent.stderr
    request, status, body = sent.stdout.splitlines()
    delivery = request.split("X-GitHub-Delivery: ")[1].rstrip(")")
    assert str(uuid.UUID(delivery)) == delivery
    assert request.startswith(f"POST {replay_url(load_config(config, {}))} ")
    assert status == "HTTP 202 Accepted"
    assert json.loads(body) == {"delivery": delivery, "enqueued": [],
                                "ignored": "auto_review_off"}
    assert e2e.db("SELECT event, action, outcome FROM deliveries WHERE delivery_id = ?",
                  delivery) == [("pull_request", "opened", "ignored:auto_review_off")]

    nowhere = cli("replay", "--config", str(config), "--event", "ping", str(payload),
                  "--url", "http://127.0.0.1:9/webhook")
    assert nowhere.returncode == 1
    assert "replay: POST http://127.0.0.1:9/webhook failed" in nowhere.stderr
    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0


def test_replay_sends_github_s_headers_and_the_exact_bytes(tmp_path: Path,
                                                          e2e: E2E) -> None:
    config = load_config(e2e.configure(), {})
    payload = tmp_path / "ping.json"
    payload.write_bytes(b'{"zen": "Keep it logically awesome.",  "hook_id": 1}\n')
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(401, json={"error": "bad signature"})

    out, err = io.StringIO(), io.StringIO()
    code = replay(config, "ping", payload, url="http://service.test/hook", out=out, err=err,
                  transport=httpx.MockTransport(answer))
    [request] = seen
    assert request.content == payload.read_bytes()  # signed and sent as written
    check_signature(request.content, request.headers["X-Hub-Signature-256"],
                    [WEBHOOK_SECRET])
    assert request.headers["X-GitHub-Event"] == "ping"
    assert request.headers["User-Agent"].startswith("GitHub-Hookshot/")
    assert request.headers["X-GitHub-Hook-Installation-Target-ID"] == "4242"
    assert code == 1 and "HTTP 401 Unauthorized" in out.getvalue()
    assert WEBHOOK_SECRET not in out.getvalue() + err.getvalue()

    not_json = tmp_path / "broken.json"
    not_json.write_text("{oops")
    assert replay(config, "ping", not_json, url=None, out=out, err=err) == 2
    assert "is not JSON" in err.getvalue()
    assert replay(config, "pull request", payload, url=None, out=out, err=err) == 2



def test_review_interrupted_hands_the_claimed_row_back(e2e: E2E) -> None:
    config = str(e2e.configure(review_steps(sleep=60)))
    assert e2e.scenario is not None
    scenario = e2e.scenario
    with (e2e.tmp / "review.out").open("w") as out, (e2e.tmp / "review.err").open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "service", "review", "--config", config, "--repo", REPO,
             "--pr", str(PR)], cwd=ROOT, stdout=out, stderr=err)
        try:
            [call] = wait_for("the engine to start", lambda: started_calls(scenario))
            process.send_signal(signal.SIGINT)  # Ctrl-C
            assert process.wait(timeout=20) == 130
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "interrupted; a review already claimed was handed back" in (
        e2e.tmp / "review.err").read_text()
    assert e2e.db("SELECT stop_reason, used_tokens FROM ledger") == [("infrastructure", 50_000)]
    assert e2e.db("SELECT status, attempts FROM queue") == [("pending", 1)]
    with pytest.raises(ProcessLookupError):
        os.killpg(call["pgid"], 0)  # the engine's process group is gone
