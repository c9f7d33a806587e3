"""Characters that render as nothing (or reorder text): one definition for every edge.

The prompt strips them from pull-request prose before a model reads it; the publisher
writes them out visibly in anything it echoes back. Both ask the same question with two
knobs: whether Unicode line separators count, and whether unassigned code points do.
"""

from __future__ import annotations

import unicodedata
from typing import Final

#: Hangul fillers and the braille blank: letters that draw nothing.
FILLERS: Final = frozenset("\u115f\u1160\u3164\uffa0\u2800")
#: Line and paragraph separators and NEL, which callers turn into plain newlines.
NEWLINES: Final = frozenset("\u2028\u2029\u0085")


def is_invisible(ch: str, *, line_breaks: bool = False, unassigned: bool = False) -> bool:
    """Whether ``ch`` renders as nothing (``\\n`` and ``\\t`` never count).

    ``line_breaks``: the separators in ``NEWLINES`` count too. ``unassigned``: so does an
    unassigned code point (category Cn), since nothing vouches for how it renders.
    """
    if ch in "\n\t":
        return False
    if ch in FILLERS or (line_breaks and ch in NEWLINES):
        return True
    code = ord(ch)
    if 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:  # variation selectors
        return True
    categories = ("Cc", "Cf", "Co", "Cs", "Cn") if unassigned else ("Cc", "Cf", "Co", "Cs")
    return unicodedata.category(ch) in categories


def reveal(ch: str) -> str:
    """``ch`` written out as ``<U+`` its code point in hex ``>``."""
    return f"<U+{ord(ch):04X}>"
