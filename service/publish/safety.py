"""Making text safe to post as the App (pure).

Everything the publisher posts that came from the pull request or from the model (which
read the pull request) passes through ``clean``:

- **nothing hidden**: HTML comments (closed or left open) and ``[//]: # (…)`` link-reference
  comments are removed; invisible characters (zero-width, bidi controls, other format and
  control characters, tag characters, variation selectors, fillers, private-use and
  unassigned code points) are shown as
  ``<U+202E>`` rather than passed on, so a Trojan-Source trick in a finding is visible;
- **no pings**: an ``@name`` in prose gets a U+2060 WORD JOINER after the ``@``, so a
  pull request cannot make the App mention (notify) a person or a team; code is left alone;
- **no secrets**: anything shaped like a credential is redacted (``service.config.redact``; the
  GitHub client redacts once more, with the service's own secrets, on the way out);
- **no trigger**: the trigger phrase is neutralised (``service.intake.rules.mention.neutralise``).

``neutralise`` is applied once more to every finished body, so text of our own cannot
carry the phrase either. Sizes are measured as GitHub is strictest about them: in UTF-16
code units (an emoji counts twice), against the 65,536-character body limit.
"""

from __future__ import annotations

import re
from typing import Final

from service.config.redact import redact_shapes
from service.intake.rules.markdown import mask_non_prose
from service.intake.rules.mention import neutralise
from service.model.invisible import NEWLINES, is_invisible, reveal

#: GitHub's limit on a comment, review or pull request body.
MAX_BODY: Final = 65_536
WORD_JOINER: Final = "\u2060"

_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_LINK_REF_COMMENT = re.compile(r"^[ \t]{0,3}\[[^\]\n]*\]:[ \t]*#.*$", re.MULTILINE)
_MENTION = re.compile(r"(?<![A-Za-z0-9_`.@/\-])@(?=[A-Za-z0-9])")
_NEWLINES: Final = NEWLINES


def github_length(text: str) -> int:
    """``text``'s length as GitHub's limits count it at most: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def _invisible(ch: str) -> bool:
    return is_invisible(ch, unassigned=True)


def reveal_invisible(text: str) -> str:
    """Every invisible character written out as ``<U+hex>``."""
    return "".join(reveal(ch) if _invisible(ch) else ch for ch in text)


def defuse_mentions(text: str) -> str:
    """``@name`` in prose (and in ``>`` quotes) made inert; code spans and blocks kept."""
    if "@" not in text:
        return text
    masked = mask_non_prose(text).split("\n")
    out: list[str] = []
    for line, prose in zip(text.split("\n"), masked, strict=True):
        if line.lstrip().startswith(">"):
            out.append(_MENTION.sub("@" + WORD_JOINER, line))
            continue
        if "@" not in prose:
            out.append(line)
            continue
        spots = {m.start() for m in _MENTION.finditer(prose)}
        out.append("".join(ch + WORD_JOINER if i in spots else ch for i, ch in enumerate(line)))
    return "\n".join(out)


def clean(text: str, phrase: str) -> str:
    """Untrusted text (from the pull request or the model), ready to post."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join("\n" if ch in _NEWLINES else ch for ch in text)
    text = _HTML_COMMENT.sub("", text)
    text = _LINK_REF_COMMENT.sub("", text)
    text = redact_shapes(text)[0]
    text = reveal_invisible(text)
    text = defuse_mentions(text)
    return neutralise(text, phrase).strip()


def clean_line(text: str, phrase: str) -> str:
    """``clean`` for text that must stay on one line (a title, a path)."""
    return " ".join(clean(text, phrase).split())


def code(text: str) -> str:
    """``text`` as one inline code span, whatever backticks it holds."""
    text = " ".join(text.split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def truncate(text: str, limit: int, note: str) -> str:
    """``text`` cut to at most ``limit`` (GitHub length), ending with ``note`` when cut.

    The cut falls on a line boundary when one is near, so Markdown is not left mid-line.
    """
    if github_length(text) <= limit:
        return text
    room = max(0, limit - github_length(note) - 2)
    # Shrink by code points until the UTF-16 length fits (at most 2 units per point).
    cut = text[:room]
    while github_length(cut) > room:
        cut = cut[: len(cut) - max(1, (github_length(cut) - room) // 2)]
    newline = cut.rfind("\n")
    if newline > room // 2:
        cut = cut[:newline]
    return f"{cut.rstrip()}\n\n{note}"
