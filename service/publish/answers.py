"""The answer to a question (``@claude ask``, or a reply in one of the App's threads), as
posted (pure: no I/O, no clock).

It quotes the question, then gives the answer, cut to ``ask.max_answer_chars``, then says
what it rests on when that matters: the head it answered for when the pull request has
moved on since, and the files it could not read. Like every post it starts with the run's
marker, and everything the model or a person wrote goes through ``safety.clean`` (the
trigger phrase neutralised, mentions defused, token shapes redacted).
"""

from __future__ import annotations

from typing import Final

from service.publish import coverage
from service.publish.compose import Asker, account_line, finish, short
from service.publish.markers import run_marker
from service.publish.publication import Publication
from service.publish.safety import clean, code, truncate

#: The quoted question is cut to this many characters: it is there to say what is being
#: answered, and the comment it quotes is one click away.
QUOTE_CHARS: Final = 600
CUT_NOTE: Final = "_(Cut: answers are kept under {limit:,} characters, `ask.max_answer_chars`.)_"


def quoted(question: str, phrase: str) -> str:
    """The question as a Markdown quote (cleaned, cut to ``QUOTE_CHARS``)."""
    text = clean(question, phrase)
    if len(text) > QUOTE_CHARS:
        text = text[:QUOTE_CHARS].rstrip() + " …"
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines()) or "> …"


def answer_comment(pub: Publication, current_head: str, *, phrase: str, max_chars: int,
                   asker: Asker | None) -> str:
    """The answer of the run ``pub`` (an ``ask`` with an answer), for a pull request whose
    head is ``current_head`` now."""
    answer = pub.answer
    assert answer is not None
    assert answer.text is not None
    who = f"@{asker.login} asked" if asker is not None else "The question"
    said = truncate(clean(answer.text, phrase), max_chars, CUT_NOTE.format(limit=max_chars))
    notes = []
    if current_head != pub.head_sha:
        notes.append(f"_Answered for {code(short(pub.head_sha))}, the head when the question "
                     f"was taken up; the pull request has moved on to "
                     f"{code(short(current_head))} since._")
    seen = pub.coverage
    if seen is not None and seen.files and seen.reviewed < seen.files:
        notes.append(f"_The answer read the diff of {seen.reviewed:,} of {seen.files:,} "
                     f"changed files ({coverage.breakdown(pub.omitted)})._")
    return finish([run_marker(pub.dedupe_key), f"{who}:\n\n{quoted(answer.question, phrase)}",
                    said, *notes, account_line(pub, phrase)], phrase)
