"""Who a finding is across reviews of one pull request (pure).

A finding's fingerprint is its path, its category and the code it points at, normalised:
each line stripped, runs of blanks collapsed, blank lines dropped. It does not hold the
line number, so a push that moves the code up or down keeps it; it changes when the code
it points at changes, which is when raising the finding again is worth a person's time.
The worker computes it from the commit the finding is anchored on (the head for ``RIGHT``,
the base for ``LEFT``); the publisher does not post a finding whose fingerprint was already
posted on the pull request (``storage.posted_findings``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Final

__all__ = ["fingerprint", "pointed_at"]

_BLANKS: Final = re.compile(r"\s+")
#: The code around a one-line finding that is taken with it: a line alone is often too
#: plain (`}`, `return None`) to tell two places in one file apart.
CONTEXT_LINES: Final = 1


def pointed_at(text: str, start: int, end: int) -> list[str]:
    """Lines ``start``..``end`` (1-based, inclusive) of ``text``, with ``CONTEXT_LINES``
    around a single line; what lies past the end of the file is left out."""
    lines = text.splitlines()
    if start == end:
        start, end = start - CONTEXT_LINES, end + CONTEXT_LINES
    return lines[max(start, 1) - 1:max(end, 0)]


def fingerprint(path: str, category: str, code: Sequence[str]) -> str:
    """The fingerprint (32 hex digits) of a finding of ``category`` on ``code`` in ``path``."""
    normalised = "\n".join(n for n in (_BLANKS.sub(" ", line).strip() for line in code) if n)
    digest = hashlib.sha256(f"{path}\0{category}\0{normalised}".encode()).hexdigest()
    return digest[:32]
