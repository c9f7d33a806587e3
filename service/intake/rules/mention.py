"""The trigger phrase: finding it in a comment, reading its command, and defusing it.

``find_mention(body, phrase)`` answers "did this comment ask the agent?" and, if so,
with which command. The phrase (``triggers.mention``, ``@claude`` by default) counts
case-insensitively, as a whole word, only in prose (see ``markdown.mask_non_prose``).
The command is the first word after it on the same line, optionally after ``please``:
``describe`` asks for a description, ``ask`` asks a question (the rest of the comment);
``review``, nothing, or any other word asks for a review, because whoever addressed the
agent wanted it to look at the change. (A reply in one of the App's own review threads is
a question whatever follows the phrase, unless it names ``review`` or ``describe``: that
rule is ``classify``'s, which knows whose thread it is.)

``neutralise(text, phrase)`` is the other half of self-loop protection: it is applied to
everything the agent posts, so its own words can never contain the phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from service.model.jobs import Command

from .markdown import mask_non_prose

#: Inserted after the first character of every occurrence of the phrase by ``neutralise``.
#: U+2060 WORD JOINER renders as nothing and forbids a line break, so ``@⁠claude`` looks
#: like the original, does not notify a GitHub user named ``claude``, and no longer
#: matches the phrase. The mention finder must therefore never strip invisible characters.
NEUTRALISER = "\u2060"

# A character before the phrase that makes it part of a bigger token rather than a
# mention: a word character, or the punctuation of e-mail addresses, paths and logins
# (``me@claude``, ``/@claude``, ``a.@claude``, ``x-@claude``, ``@@claude``).
_JOINS_BEFORE = frozenset("@./-")
# After the phrase, ``-`` continues a login (``@claude-bot`` is someone else); and ``'``,
# ``’`` or ``.`` followed by a word character continue a token (``@claude's``, ``@claude.ai``).
_JOINS_AFTER_IF_WORD_FOLLOWS = frozenset("'’.")
_COMMAND = re.compile(r"[ \t,:;]*(?:please[ \t,:;]+)?([A-Za-z]+)(?![\w-])", re.IGNORECASE)
_COMMANDS: dict[str, Command] = {"review": "review", "describe": "describe", "ask": "ask"}


@dataclass(frozen=True)
class Mention:
    """A use of the trigger phrase that counts: the command it carries and the 0-based
    line (after CRLF normalisation) it is on."""

    command: Command
    line: int
    #: The command was written out (``review``, ``describe``, ``ask``), not taken as the
    #: default for nothing or another word.
    explicit: bool = field(default=False, compare=False)


def validate_phrase(phrase: str) -> str:
    """Return ``phrase`` if it can serve as a trigger phrase, else raise ``ValueError``.

    It needs at least two characters (so that ``neutralise`` has somewhere to split it),
    no whitespace (a mention is one token, and the finder works line by line), and no
    ``NEUTRALISER`` (which would defeat ``neutralise``).
    """
    if not isinstance(phrase, str):
        raise ValueError(f"triggers.mention must be a string, got {type(phrase).__name__}")
    if len(phrase) < 2:
        raise ValueError(f"triggers.mention must be at least 2 characters, got {phrase!r}")
    if any(char.isspace() for char in phrase):
        raise ValueError(f"triggers.mention must not contain whitespace, got {phrase!r}")
    if NEUTRALISER in phrase:
        raise ValueError("triggers.mention must not contain U+2060 (word joiner)")
    return phrase


@lru_cache(maxsize=16)
def _occurrences(phrase: str) -> re.Pattern[str]:
    """A zero-width pattern matching at the start of every occurrence, overlaps included."""
    validate_phrase(phrase)
    return re.compile(f"(?={re.escape(phrase)})", re.IGNORECASE)


@lru_cache(maxsize=16)
def _literal(phrase: str) -> re.Pattern[str]:
    validate_phrase(phrase)
    return re.compile(re.escape(phrase), re.IGNORECASE)


def find_mention(body: str, phrase: str) -> Mention | None:
    """The first use of ``phrase`` in ``body`` that counts as asking the agent, or None.

    Never raises on any ``str`` body; the cost is linear in its length.
    """
    if not isinstance(body, str):
        raise TypeError(f"a comment body is a str, got {type(body).__name__}")
    pattern = _occurrences(phrase)
    if _literal(phrase).search(body) is None:
        return None  # the common case: skip the markdown pass entirely
    prose = mask_non_prose(body)
    size = len(phrase)
    for match in pattern.finditer(prose):
        start = match.start()
        end = start + size
        if _stands_alone(prose, start, end):
            command, explicit = _command_after(prose, end)
            return Mention(command=command, line=prose.count("\n", 0, start),
                           explicit=explicit)
    return None


def _stands_alone(text: str, start: int, end: int) -> bool:
    """Whether the occurrence at ``text[start:end]`` is a whole token, not part of one."""
    if start > 0:
        before = text[start - 1]
        if before.isalnum() or before == "_" or before in _JOINS_BEFORE:
            return False
    if end < len(text):
        after = text[end]
        if after.isalnum() or after in "_-":
            return False
        if after in _JOINS_AFTER_IF_WORD_FOLLOWS and end + 1 < len(text):
            following = text[end + 1]
            if following.isalnum() or following == "_":
                return False
    return True


def _command_after(text: str, end: int) -> tuple[Command, bool]:
    """The command written right after the phrase (``review`` unless it names another),
    and whether it was written out."""
    match = _COMMAND.match(text, end)
    named = None if match is None else _COMMANDS.get(match.group(1).lower())
    return (named, True) if named is not None else ("review", False)


def neutralise(text: str, phrase: str) -> str:
    """``text`` with every occurrence of ``phrase`` (any case) made inert.

    Each occurrence gets ``NEUTRALISER`` after its first character. One pass is not
    always enough for a phrase that overlaps itself (``aa`` in ``aaa``), so this repeats
    until no occurrence is left; every pass splits at least one adjacent pair of
    characters that no later match can span, so it terminates. For ``@claude`` one pass
    always suffices.
    """
    pattern = _literal(phrase)
    while pattern.search(text) is not None:
        # Split the match as written, so the author's capitalisation is kept.
        text = pattern.sub(lambda m: m.group(0)[0] + NEUTRALISER + m.group(0)[1:], text)
    return text
