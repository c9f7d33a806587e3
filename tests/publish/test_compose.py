"""The pure parts of the publisher: markers, cleaning what is echoed back, the bodies and
their size limit, and the publish config keys."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from service.config.connections import ENV_PRIVATE_KEY, ENV_WEBHOOK_SECRET
from service.config.errors import ConfigError
from service.config.validate import parse_config
from service.engine.base import Assessment, Finding
from service.intake.rules.mention import find_mention
from service.publish import compose
from service.publish.markers import (
    run_marker,
)
from service.publish.run_content import Omitted
from service.publish.safety import MAX_BODY, github_length
from tests.publisher_rig import ACCOUNT, ANCHORED, HEAD, KEY, PHRASE, UNANCHORED, publication
from tests.simulator.harness import app_key_pair

# -- bodies ----------------------------------------------------------------------------------


def test_review_puts_anchored_findings_inline_and_the_rest_in_the_body() -> None:
    post = compose.review(publication(), (ANCHORED,), (UNANCHORED,), phrase=PHRASE)
    payload = post.payload(HEAD)
    assert payload["commit_id"] == HEAD and payload["event"] == "COMMENT"
    (comment,) = post.comments
    assert comment == {"path": "src/app.py", "line": 3, "side": "RIGHT", "start_line": 2,
                       "start_side": "RIGHT", "body": comment["body"]}
    assert post.body.startswith(run_marker(KEY) + "\n")
    assert "helper is long" in post.body and "json is imported twice" not in post.body
    assert "1 finding(s) are comments on the diff" in post.body
    single = dataclasses.replace(ANCHORED, start_line=3)
    assert "start_line" not in compose.inline_comment(single, PHRASE)  # equal lines: omitted


def test_the_body_says_what_the_run_was() -> None:
    pub = publication(
        omitted=(Omitted("a.lock", "excluded", 10, "*.lock"),
                 Omitted("big.sql", "max_diff_lines", 9000)),
        account=dataclasses.replace(ACCOUNT, mode="mention_only", reviewed_since="ab" * 20,
                                    confidence="estimated", tokens=999_999))
    body = compose.review(pub, (), pub.findings, phrase=PHRASE).body
    assert "Reduced review" in body and "Reviewed the changes since `abababababab`" in body
    assert "999,999 tokens (estimated)" in body and "`m-1`" in body
    assert "`a.lock` — matches `*.lock`" in body and "9,000 lines" in body
    nothing = publication(findings=(), assessment=None,
                          omitted=(Omitted("a.lock", "excluded", 10, "*.lock"),))
    assert "Nothing was reviewed" in compose.review(nothing, (), (), phrase=PHRASE).body


def test_an_oversized_review_degrades_but_stays_within_the_limit() -> None:
    huge = tuple(Finding(path=f"src/f{i}.py", line=1, side="RIGHT", start_line=None,
                         severity="minor" if i % 2 else "critical", category="correctness",
                         title=f"finding {i}", body=("x" * 7000) + " @claude")
                 for i in range(50))
    pub = publication(findings=huge, assessment=Assessment("s" * 4000, "high"))
    body = compose.review(pub, (), huge, phrase=PHRASE, fallback=True).body
    assert github_length(body) <= MAX_BODY
    assert body.startswith(run_marker(KEY))
    assert "listed by title only" in body
    assert "finding 49" in body  # every finding is at least named
    assert body.index("finding 0") < body.index("finding 1 ")  # critical first
    assert find_mention(body, PHRASE) is None
    invisible = publication(findings=(dataclasses.replace(UNANCHORED, body="\u200b" * 8000),))
    assert github_length(compose.review(invisible, (), invisible.findings,
                                        phrase=PHRASE).body) <= MAX_BODY


def test_failure_and_outdated_texts() -> None:
    failed = publication(outcome="failed", findings=(), assessment=None,
                         account=dataclasses.replace(ACCOUNT, stop_reason="usage_limit"))
    text = compose.failure_comment(failed, compose.Asker("bob", "https://github.com/x#1"),
                                   phrase=PHRASE)
    assert text.startswith(run_marker(KEY))
    assert "@bob, I could not finish the review for [your request](https://github.com/x#1)" \
        in text and "usage limit" in text
    outdated = compose.outdated_comment(publication(), "9f" * 20, phrase=PHRASE)
    assert "**Outdated.**" in outdated and "`9f9f9f9f9f9f`" in outdated
    assert "json is imported twice" in outdated


# -- config ----------------------------------------------------------------------------------


def test_publish_config_keys(tmp_path: Path) -> None:
    private_pem, _ = app_key_pair()
    env = {ENV_PRIVATE_KEY: private_pem, ENV_WEBHOOK_SECRET: "s3cret-hook"}
    data: dict[str, object] = {
        "github": {"app_id": 1}, "triggers": {},
        "budget": {"session_tokens": 88000, "weekly_tokens": 1500000, "max_run_tokens": 30000},
        "publish": {"dry_run": True, "describe_updates_body": True},
    }
    config = parse_config(data, env, tmp_path)
    assert config.publish.dry_run and config.publish.describe_updates_body
    data["publish"] = {"describe_updates_body": "yes"}
    with pytest.raises(ConfigError) as caught:
        parse_config(data, env, tmp_path)
    assert caught.value.problems == [
        'publish.describe_updates_body: must be true or false, got "yes"']
