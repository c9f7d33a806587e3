"""The App's markers are whole lines only its own posts carry, and the description block
keeps the author's text around it."""

from __future__ import annotations

import pytest

from service.publish.markers import (
    DESCRIPTION_END,
    DESCRIPTION_START,
    find_marked,
    has_marker,
    run_marker,
    split_description_block,
    with_description_block,
)
from tests.publisher_rig import KEY


def bot(body: str, *, state: str = "COMMENTED", login: str = "pr-reviewer[bot]",
        kind: str = "Bot") -> dict[str, object]:
    return {"id": 9, "body": body, "state": state, "user": {"login": login, "type": kind}}


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
