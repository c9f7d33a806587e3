"""What the App echoes back is made safe: nothing hidden, nobody pinged, no trigger phrase,
no token, and sized as GitHub counts."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from service.intake.rules.mention import find_mention
from service.publish.safety import WORD_JOINER, clean, code, github_length, truncate
from tests.kit.thorough import examples
from tests.publisher_rig import PHRASE


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
