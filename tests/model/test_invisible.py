"""What renders as nothing, with the two knobs the prompt and the publisher set."""

from __future__ import annotations

import pytest

from service.model.invisible import FILLERS, NEWLINES, is_invisible, reveal


@pytest.mark.parametrize("ch", [
    "\u200b",  # zero-width space (Cf)
    "\u202e",  # right-to-left override: reorders what follows
    "\u2066",  # left-to-right isolate
    "\x07",    # a control character (Cc)
    "\ue000",  # private use (Co)
    "\ufe0f",  # a variation selector
    "\U000e0101",  # a supplementary variation selector
    *sorted(FILLERS),
])
def test_what_draws_nothing_or_reorders_is_invisible(ch: str) -> None:
    assert is_invisible(ch)


@pytest.mark.parametrize("ch", ["a", " ", "\n", "\t", "é", "漢", "😀"])
def test_what_a_reader_sees_is_not(ch: str) -> None:
    assert not is_invisible(ch, line_breaks=True, unassigned=True)


def test_line_separators_count_only_when_asked() -> None:
    for ch in NEWLINES:
        assert is_invisible(ch, line_breaks=True)
    # U+2028/U+2029 are Zl/Zp and NEL is Cc: only the separators depend on the knob.
    assert not is_invisible("\u2028") and not is_invisible("\u2029")


def test_unassigned_code_points_count_only_when_asked() -> None:
    unassigned = "\U000e0080"  # category Cn
    assert not is_invisible(unassigned)
    assert is_invisible(unassigned, unassigned=True)


def test_reveal_writes_the_code_point_out() -> None:
    assert reveal("\u200b") == "<U+200B>"
    assert reveal("\x07") == "<U+0007>"
    assert reveal("\U000e0101") == "<U+E0101>"
