"""Typed reads of one YAML mapping that record problems instead of raising: each names its
key as known, so that the keys nobody read are reported as unknown, with the nearest one."""

from __future__ import annotations

import pytest

from service.config.reader import MISSING, Section, show


def test_show_names_a_value_as_the_operator_wrote_it_and_short() -> None:
    assert [show(v) for v in (None, True, False, 3, 1.5, "x", {}, [], b"")] == [
        "null", "true", "false", "3", "1.5", '"x"', "a mapping", "a list", "a bytes"]
    assert show("y" * 50) == '"' + "y" * 37 + '..."'


def test_problems_carry_the_key_path_and_unread_keys_are_unknown() -> None:
    problems: list[str] = []
    top = Section(problems, "", {"server": {"port": "80", "hots": "x"}, 7: "seven"})
    server = top.section("server")
    assert server.integer("port", 8080) == 0
    assert server.string("host", "127.0.0.1") == "127.0.0.1"  # absent: the default
    server.finish()
    top.finish()
    assert problems == ['server.port: must be an integer, got "80"',
                        "server.hots: unknown key (did you mean host?)",
                        "(top level): unknown key 7"]


def test_a_missing_required_section_is_said_once_not_for_each_key() -> None:
    problems: list[str] = []
    top = Section(problems, "", {})
    budget = top.section("budget", required=True, hint="the token windows")
    assert budget.quiet
    assert budget.integer("session_tokens", None) == 0
    assert problems == ["budget: required section is missing (the token windows)"]
    wrong = Section(problems, "", {"budget": 5}).section("budget")
    assert wrong.quiet and problems[-1] == "budget: must be a mapping, got 5"


@pytest.mark.parametrize(("value", "why"), [
    (0, "must be between 1 and 10, got 0"), (11, "must be between 1 and 10, got 11"),
    (True, "must be an integer, got true"), (2.0, "must be an integer, got 2.0"),
])
def test_an_integer_is_bounded_and_a_bool_is_not_one(value: object, why: str) -> None:
    problems: list[str] = []
    assert Section(problems, "w", {"n": value}).integer("n", 1, maximum=10) == 0
    assert problems == [f"w.n: {why}"]


def test_strings_and_lists_of_them() -> None:
    problems: list[str] = []
    s = Section(problems, "t", {"name": " ", "maybe": None, "flag": "yes",
                                "who": ["OWNER", "owner", "MEMBR", "", "OWNER"]})
    assert s.string("name", "d") == ""
    assert s.optional_string("maybe") is None
    assert s.boolean("flag", False) is False
    assert s.strings("who", (), allowed=("OWNER", "MEMBER")) == ("OWNER",)
    assert problems == [
        "t.name: must not be empty",
        't.flag: must be true or false, got "yes"',
        't.who[1]: must be one of OWNER, MEMBER, got "owner" (did you mean OWNER?)',
        't.who[2]: must be one of OWNER, MEMBER, got "MEMBR" (did you mean MEMBER?)',
        't.who[3]: must be a non-empty string, got ""',
        't.who[4]: "OWNER" is listed more than once',
    ]


def test_peek_does_not_count_as_a_read_and_marks_tell_what_failed_since() -> None:
    problems: list[str] = []
    s = Section(problems, "", {"a": 1})
    assert s.peek("a") == 1 and s.peek("b") is MISSING
    mark = s.mark()
    s.finish()  # "a" was only peeked: unknown
    assert s.failed_since(mark) and s.since(mark) == ["a: unknown key (valid keys: )"]
