"""The answer to a question as posted (pure): the question quoted, the answer cleaned and
cut to ``ask.max_answer_chars``, and said plainly what it rests on."""

from __future__ import annotations

from service.publish.answers import QUOTE_CHARS, answer_comment, quoted
from service.publish.compose import Asker
from service.publish.markers import run_marker
from service.publish.publication import Publication
from service.publish.run_content import AskAnswer, Coverage, Omitted
from tests.publisher_rig import HEAD, KEY, NEW_HEAD, PHRASE, publication

NEUTRAL = "@\u2060claude"


def asked(text: str | None = "Yes, see `helper`.", *, question: str = "@claude ask why?",
          **changes: object) -> Publication:
    return publication(command="ask", findings=(), assessment=None,
                       answer=AskAnswer(question=question, text=text), **changes)


def test_the_answer_quotes_the_question_and_names_the_asker() -> None:
    body = answer_comment(asked(), HEAD, phrase=PHRASE, max_chars=4_000,
                          asker=Asker("bob"))
    lines = body.splitlines()
    assert lines[0] == run_marker(KEY)
    assert f"@bob asked:\n\n> {NEUTRAL} ask why?\n\nYes, see `helper`." in body
    assert "answer" in body.rsplit("<sub>", 1)[1] and "moved on" not in body
    assert PHRASE not in body  # the phrase never appears live in anything posted


def test_what_the_model_wrote_is_cleaned_and_cut() -> None:
    text = ("Ping @alice and @claude review <!-- hidden --> token ghp_" + "a" * 36 + "\n"
            + "x" * 5_000)
    body = answer_comment(asked(text), HEAD, phrase=PHRASE, max_chars=1_000,
                          asker=None)
    assert body.startswith(run_marker(KEY)) and "The question:" in body
    assert "@alice" not in body and PHRASE not in body and "hidden" not in body
    assert "ghp_" + "a" * 36 not in body
    assert "answers are kept under 1,000 characters" in body
    assert body.count("x") < 1_100


def test_a_moved_head_and_unread_files_are_said() -> None:
    pub = asked(coverage=Coverage(files=5, reviewed=3),
                omitted=(Omitted("a.lock", "lock_file", 10),
                         Omitted("big.py", "max_run_tokens", 4_000)))
    body = answer_comment(pub, NEW_HEAD, phrase=PHRASE, max_chars=4_000,
                          asker=None)
    assert f"Answered for `{HEAD[:12]}`" in body and f"`{NEW_HEAD[:12]}` since" in body
    assert "read the diff of 3 of 5 changed files" in body


def test_a_long_question_is_quoted_in_part() -> None:
    quote = quoted("first line\n\n" + "y" * 2 * QUOTE_CHARS, PHRASE)
    assert quote.startswith("> first line\n>\n> yyy") and quote.endswith(" …")
    assert len(quote) < QUOTE_CHARS + 20
