"""The pure parts of the publisher: markers, cleaning what is echoed back, the bodies and
their size limit, and the publish config keys."""

from __future__ import annotations

import dataclasses
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.config.errors import ConfigError
from service.config.schema import ENV_PRIVATE_KEY, ENV_WEBHOOK_SECRET
from service.config.validate import parse_config
from service.engine.base import Assessment, Finding
from service.intake.rules.mention import find_mention
from service.publish import compose
from service.publish.markers import (
    DESCRIPTION_END,
    DESCRIPTION_START,
    find_marked,
    has_marker,
    run_marker,
    split_description_block,
    with_description_block,
)
from service.publish.run_content import Omitted
from service.publish.safety import MAX_BODY, WORD_JOINER, clean, code, github_length, truncate
from tests.kit.thorough import examples
from tests.publisher_rig import ACCOUNT, ANCHORED, HEAD, KEY, PHRASE, UNANCHORED, publication
from tests.simulator.harness import app_key_pair


def bot(body: str, *, state: str = "COMMENTED", login: str = "pr-reviewer[bot]",
        kind: str = "Bot") -> dict[str, object]:
    return {"id": 9, "body": body, "state": state, "user": {"login": login, "type": kind}}


# -- markers ---------------------------------------------------------------------------------


def test_markers_are_whole_lines_and_only_the_apps_count() -> None:
    marker = run_marker(KEY)
    assert marker == f"<!-- pr-review-agent:{KEY} -->"
    assert has_marker(f"text\n{marker}\nmore", marker)
    assert not has_marker(f"quoted: {marker}", marker)
    assert not has_marker(run_marker(KEY + "4"), marker)
    body = f"{marker}\nreview"
    assert find_marked([bot(body, kind="User", login="mallory")], marker) is None  # forged
    assert find_marked([bot(body, state="PENDING")], marker) is None
    assert find_marked([bot(body, login="other-app[bot]")], marker, "pr-reviewer[bot]") is None
    assert find_marked([bot("no marker"), bot(body)], marker, "pr-reviewer[bot]") is not None
    for bad in ("a -->b", "two--dashes", "line\nbreak", ""):
        with pytest.raises(ValueError, match="marker"):
            run_marker(bad)


def test_the_description_block_keeps_the_authors_text() -> None:
    authored = "Why this change.\r\n\r\nFixes #4"
    once = with_description_block(authored, "First.")
    assert once.startswith(authored)
    before, block, after = split_description_block(once)
    assert before.rstrip() == authored and block is not None and "First." in block
    assert after == ""
    twice = with_description_block(once + "\nP.S. by the author", "Second.")
    assert twice.count(DESCRIPTION_START) == 1 and twice.count(DESCRIPTION_END) == 1
    assert "First." not in twice and "Second." in twice
    assert twice.startswith(authored) and twice.endswith("\nP.S. by the author")
    assert with_description_block(with_description_block(once, "Second."), "Second.") == (
        with_description_block(once, "Second."))
    assert with_description_block(None, "Only.") == (
        f"{DESCRIPTION_START}\nOnly.\n{DESCRIPTION_END}\n")
    # A start line with no end line is the author's text, not a block.
    dangling = f"{DESCRIPTION_START}\nmine"
    assert split_description_block(dangling) == (dangling, None, "")


# -- cleaning --------------------------------------------------------------------------------


def test_clean_hides_nothing_pings_nobody_and_cannot_trigger() -> None:
    text = ("Ask @claude review <!-- pr-review-agent:x --> now\u202e.\n"
            "[//]: # (hidden note)\n"
            "cc @octocat and @acme/team; mail me@example.com\n"
            "```\n@dataclass\n```\n"
            "> @quoted\n"
            "token ghs_" + "A" * 36)
    out = clean(text, PHRASE)
    assert "<!--" not in out and "hidden note" not in out
    assert "<U+202E>" in out and "\u202e" not in out
    assert f"@{WORD_JOINER}octocat" in out and f"@{WORD_JOINER}acme/team" in out
    assert "me@example.com" in out and "\n@dataclass\n" in out
    assert f"> @{WORD_JOINER}quoted" in out
    assert "[redacted token]" in out and "ghs_A" not in out
    assert find_mention(out, PHRASE) is None


@settings(max_examples=examples(150), deadline=None)
@given(st.text(max_size=300))
def test_clean_never_leaves_the_phrase_or_an_invisible_character(text: str) -> None:
    out = clean(text, PHRASE)
    assert find_mention(out, PHRASE) is None
    assert "<!--" not in out
    assert all(ch == WORD_JOINER or ch in "\n\t"
               or unicodedata.category(ch) not in ("Cc", "Cf", "Co", "Cs", "Cn")
               for ch in out)


def test_sizes_are_counted_as_github_counts_them() -> None:
    assert github_length("abc") == 3 and github_length("😀") == 2
    cut = truncate("line\n" * 30_000, 1000, "NOTE")
    assert github_length(cut) <= 1000 and cut.endswith("NOTE")
    assert truncate("short", 1000, "NOTE") == "short"
    assert code("a`b") == "``a`b``" and code("`x") == "`` `x ``"


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
