"""What counts as the author's prose: code blocks, quotes and code spans blanked out, the
line structure kept."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.intake.rules.markdown import mask_non_prose


def test_mask_keeps_line_structure() -> None:
    body = "a `b` c\r\n```\r\nx\r\n```\r\n> q\r\nlazy\r\n\r\n    code\r\nend"
    masked = mask_non_prose(body)
    assert masked.split("\n") == ["a     c", "", "", "", "", "", "", "", "end"]


@pytest.mark.parametrize(("text", "masked"), [
    ("run `@claude review` now", "run                  now"),
    ("``a ` b`` c", "          c"),
    ("an `unclosed span", "an `unclosed span"),  # no closing run: literal backticks
    ("~~~\n@claude\n~~~\nafter", "\n\n\nafter"),
    ("> quoted @claude\nlazy line\n\nprose", "\n\n\nprose"),
    ("para\n    indented continues it", "para\n    indented continues it"),
    ("\n    code after a blank line", "\n"),
    ("> quote\n- a list item interrupts it", "\n- a list item interrupts it"),
])
def test_what_is_not_prose_is_blanked_and_prose_is_kept(text: str, masked: str) -> None:
    assert mask_non_prose(text) == masked


@given(st.text(alphabet=st.sampled_from("ab `~>-\n\r\t#1.@"), max_size=200))
def test_masking_never_moves_prose(text: str) -> None:
    """Every character left is where it was, on the line it was on."""
    masked = mask_non_prose(text)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept = masked.split("\n")
    assert len(kept) == len(lines)
    for before, after in zip(lines, kept, strict=True):
        assert after == "" or len(after) == len(before)
        assert all(a in (" ", b) for a, b in zip(after, before, strict=False))
