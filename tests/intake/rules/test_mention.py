"""The trigger phrase: where it counts, which command it carries, and neutralise."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.intake.rules.markdown import mask_non_prose
from service.intake.rules.mention import (
    NEUTRALISER,
    Mention,
    find_mention,
    neutralise,
    validate_phrase,
)
from tests.kit.thorough import examples

PHRASE = "@claude"


@pytest.mark.parametrize(
    ("body", "command"),
    [
        ("@claude", "review"),
        ("@claude review", "review"),
        ("@claude describe", "describe"),
        ("@Claude Describe", "describe"),
        ("@CLAUDE DESCRIBE", "describe"),
        ("@claude please review this", "review"),
        ("@claude please describe", "describe"),
        ("@claude, describe", "describe"),
        ("@claude: describe this PR", "describe"),
        ("@claude what do you think?", "review"),
        ("@claude describes", "review"),  # not the word "describe": the default applies
        ("@claude description", "review"),
        ("@claude describe-ish", "review"),
        ("@claude\ndescribe", "review"),  # the command must be on the phrase's line
        ("hey @claude describe", "describe"),
        ("(@claude describe)", "describe"),
        ("thanks @claude.", "review"),
        ("@claude!", "review"),
        ("- @claude describe", "describe"),
        ("# @claude describe", "describe"),
        ("**@claude** describe", "review"),  # "**" then "describe" is not right after it
        ("`code` @claude describe", "describe"),
        ("`x`@claude describe", "describe"),
        ("see me@claude.ai and @claude describe", "describe"),
        ("@claude describe and @claude review", "describe"),  # the first mention wins
        ("I'd like a review — @claude", "review"),
    ],
)
def test_phrase_triggers_with_command(body: str, command: str) -> None:
    found = find_mention(body, PHRASE)
    assert found is not None
    assert found.command == command


@pytest.mark.parametrize(
    "body",
    [
        "",
        "no mention here",
        "@claudette review",
        "@claude-bot review",
        "@claude_ review",
        "foo@claude review",
        "me.@claude review",
        "path/@claude review",
        "@@claude review",
        "@claude's review was good",
        "ask @claude’s opinion",
        "see @claude.ai",
        "@clau de review",
        "claude review",
        # inline code, including multi-backtick spans and spans across lines
        "`@claude review`",
        "run `@claude describe` to get a description",
        "`` a ` @claude ``",
        "start `of a span\n@claude describe` ends here",
        # fenced blocks: backticks, tildes, info strings, indented fences, unclosed fences
        "```\n@claude review\n```",
        "```python\n@claude review\n```",
        "~~~\n@claude\n~~~",
        "  ```\n@claude\n  ```",
        "```\nnever closed\n@claude review",
        "````\n```\n@claude\n````",
        # indented code blocks (after a blank line, or at the start)
        "    @claude review",
        "\t@claude review",
        "text\n\n    @claude review",
        "  \t@claude review",
        # quotes, nested quotes and lazy continuation lines
        "> @claude review",
        ">@claude review",
        "   > @claude review",
        "> > @claude review",
        "> someone said\n@claude review",
        "> someone said\n    @claude review",
        # HTML-ish look-alikes that are not the phrase
        "＠claude review",
        f"@{NEUTRALISER}claude review",
    ],
)
def test_phrase_does_not_count(body: str) -> None:
    assert find_mention(body, PHRASE) is None


def test_block_boundaries_end_exclusions() -> None:
    # A closed fence, a quote followed by a blank line, and an indented block followed
    # by a paragraph all end: the phrase after them counts.
    assert find_mention("```\ncode\n```\n@claude describe", PHRASE) == Mention("describe", 3)
    assert find_mention("> quoted\n\n@claude describe", PHRASE) == Mention("describe", 2)
    assert find_mention("    code\n@claude describe", PHRASE) == Mention("describe", 1)
    assert find_mention("~~~\n```\n~~~\n@claude", PHRASE) == Mention("review", 3)
    # A shorter or different fence does not close an open one.
    assert find_mention("````\n```\n@claude\n", PHRASE) is None
    assert find_mention("~~~\n```\n@claude\n", PHRASE) is None


def test_indented_line_continuing_a_paragraph_is_prose() -> None:
    assert find_mention("some text\n    @claude describe", PHRASE) == Mention("describe", 1)


def test_list_item_or_heading_interrupts_a_quote() -> None:
    assert find_mention("> quoted\n- @claude describe", PHRASE) == Mention("describe", 1)
    assert find_mention("> quoted\n# @claude describe", PHRASE) == Mention("describe", 1)


def test_unclosed_backtick_is_literal() -> None:
    assert find_mention("a ` lone backtick @claude describe", PHRASE) == Mention("describe", 0)
    assert find_mention("`` two and ` one @claude", PHRASE) == Mention("review", 0)


def test_crlf_and_lone_cr_line_endings() -> None:
    body = "intro\r\n```\r\n@claude review\r\n```\r\n\r\n@claude describe\r\n"
    assert find_mention(body, PHRASE) == Mention("describe", 5)
    assert find_mention("> quoted\r@claude", PHRASE) is None
    assert find_mention("x\r\r@claude describe\r", PHRASE) == Mention("describe", 2)
    assert find_mention("@claude describe\r\nmore", PHRASE) == Mention("describe", 0)


def test_unicode_around_the_phrase() -> None:
    assert find_mention("merci @claude describe ✨", PHRASE) == Mention("describe", 0)
    assert find_mention("日本語@claude", PHRASE) is None  # letters join like ASCII ones
    assert find_mention("日本語 @claude", PHRASE) == Mention("review", 0)
    assert find_mention("@claudeé", PHRASE) is None
    assert find_mention("🙂@claude describe", PHRASE) == Mention("describe", 0)


def test_custom_phrase() -> None:
    assert find_mention("hey @review-agent describe", "@review-agent") == Mention("describe", 0)
    assert find_mention("hey @review-agents", "@review-agent") is None
    assert find_mention("@review-agent-two", "@review-agent") is None
    assert find_mention("!bot describe", "!bot") == Mention("describe", 0)


def test_body_must_be_text() -> None:
    with pytest.raises(TypeError):
        find_mention(None, PHRASE)  # type: ignore[arg-type]


@pytest.mark.parametrize("phrase", ["", "@", "@ claude", "@claude\n", f"@{NEUTRALISER}c"])
def test_invalid_phrases_are_refused(phrase: str) -> None:
    with pytest.raises(ValueError, match=r"triggers\.mention"):
        validate_phrase(phrase)
    with pytest.raises(ValueError, match=r"triggers\.mention"):
        find_mention("anything", phrase)


@pytest.mark.parametrize(
    "body",
    [
        "x" * 1_000_000 + " @claude describe",
        "@claudette " * 100_000 + "@claude describe",
        ("` `` ``` " * 120_000) + "@claude describe",
        "a" + "`" * 1_000_000 + "\n\n@claude describe",
        ">" * 1_000_000 + "\n\n@claude describe",
        "> a\n" * 250_000 + "\n@claude describe",
        " " * 1_000_000 + "x\n\n@claude describe",
        "```" + "x" * 1_000_000 + "`\n\n@claude describe",
        "@claude " + "d" * 1_000_000 + "é\n\n@claude describe",
        "    code\n" * 120_000 + "\n@claude describe",
    ],
    ids=["plain", "near-misses", "backtick-runs", "one-run", "markers", "quotes", "spaces",
         "bad-fence", "long-word", "indented"],
)
def test_megabyte_bodies_are_linear(body: str) -> None:
    assert len(body) >= 1_000_000
    started = time.perf_counter()
    found = find_mention(body, PHRASE)
    elapsed = time.perf_counter() - started
    assert found is not None
    # "long-word" finds its first mention (with an unknown command) before the second.
    assert found.command in ("describe", "review")
    # Linear is well under a second; quadratic on a megabyte is hours: 30 s tells them apart
    # on any machine, however loaded.
    assert elapsed < 30.0, f"{elapsed:.2f}s for a 1 MB body: super-linear behaviour"


# Fragments that exercise every branch of the scanner, plus arbitrary characters.
_FRAGMENTS = st.sampled_from([
    "@claude", "@CLAUDE", "@Claude", "@", "claude", "```", "~~~", "`", "``", "> ", ">",
    "\n", "\r\n", "\r", "    ", "\t", " ", "describe", "review", "please", "x", ".", "-",
    "'", "_", "#", "- ", "1. ", NEUTRALISER, "é", "İ", "ſ", "K",
])
_TEXT = st.lists(_FRAGMENTS | st.text(max_size=4), max_size=40).map("".join)


@given(_TEXT)
@settings(max_examples=examples(400), suppress_health_check=[HealthCheck.too_slow])
def test_finder_never_raises(body: str) -> None:
    result = find_mention(body, PHRASE)
    assert result is None or result.command in ("review", "describe")
    # Masking keeps one output line per input line, whatever the line endings were.
    assert mask_non_prose(body).count("\n") == len(re.findall(r"\r\n|\r|\n", body))


@given(st.text())
@settings(max_examples=examples(300))
def test_finder_never_raises_on_any_text(body: str) -> None:
    find_mention(body, PHRASE)


@given(_TEXT)
@settings(max_examples=examples(400))
def test_neutralised_text_never_mentions(text: str) -> None:
    out = neutralise(text, PHRASE)
    assert find_mention(out, PHRASE) is None
    # It only ever inserts the invisible joiner: nothing else is changed.
    assert out.replace(NEUTRALISER, "") == text.replace(NEUTRALISER, "")


_PHRASES = st.text(
    alphabet=st.characters(blacklist_categories=("Zs", "Zl", "Zp", "Cc", "Cs"),
                           blacklist_characters=NEUTRALISER) | st.sampled_from("aAſsSKkİi@"),
    min_size=2, max_size=5,
).filter(lambda p: not any(c.isspace() for c in p))


@given(_PHRASES, st.data())
@settings(max_examples=examples(300))
def test_neutralise_holds_for_any_phrase(phrase: str, data: st.DataObject) -> None:
    pieces = st.sampled_from([phrase, phrase.upper(), phrase.lower(), phrase[0], phrase[1:]])
    text = data.draw(st.lists(pieces | st.text(max_size=3), max_size=20).map("".join))
    out = neutralise(text, phrase)
    assert find_mention(out, phrase) is None
    assert out.replace(NEUTRALISER, "") == text.replace(NEUTRALISER, "")


def test_neutralise_examples() -> None:
    assert neutralise("ask @claude describe", PHRASE) == f"ask @{NEUTRALISER}claude describe"
    assert neutralise("@Claude and @CLAUDE", PHRASE) == (
        f"@{NEUTRALISER}Claude and @{NEUTRALISER}CLAUDE"
    )
    assert neutralise("nothing to do", PHRASE) == "nothing to do"
    # Self-overlapping phrases need more than one pass.
    assert neutralise("aaa", "aa") == f"a{NEUTRALISER}a{NEUTRALISER}a"
    # Already neutralised text is left as it is.
    once = neutralise("@claude review", PHRASE)
    assert neutralise(once, PHRASE) == once


def test_neutralised_text_stays_inert_when_quoted_or_copied() -> None:
    posted = neutralise("Reviewed. Ask @claude describe for a summary.", PHRASE)
    # A person quoting it, or pasting it into their own comment, does not trigger either.
    assert find_mention(f"> {posted}\n\nthanks", PHRASE) is None
    assert find_mention(f"copying: {posted}", PHRASE) is None
