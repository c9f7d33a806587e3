"""Reading YAML strictly: a key repeated is a problem with its place, a document that is
not YAML says where, and a problem is shown at the line of the key it names."""

from __future__ import annotations

import pytest
import yaml

from service.config.strict_yaml import at_line, key_lines, load_strict, yaml_problem

DOC = """\
server:
  port: 8080
review:
  excluded_paths:
    - "*.lock"
    - vendor/**
"""


def test_a_repeated_key_is_a_problem_and_the_later_value_is_read() -> None:
    data, duplicates = load_strict("a: 1\nb: 2\na: 3\n")
    assert data == {"a": 3, "b": 2}
    assert duplicates == ['line 3, column 1: duplicate key "a" (only the last one would '
                          'take effect)']
    assert load_strict("a: {x: 1}\nb: {x: 1}\n")[1] == []  # same key, other mappings


def test_a_document_that_is_not_yaml_says_where() -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load_strict("a: [1\n")
    assert yaml_problem(raised.value).startswith("invalid YAML at line 2, column 1")


def test_each_key_path_has_its_line() -> None:
    lines = key_lines(DOC)
    assert lines["server"] == 1 and lines["server.port"] == 2
    assert lines["review.excluded_paths"] == 4
    assert lines["review.excluded_paths[0]"] == 5 and lines["review.excluded_paths[1]"] == 6
    assert key_lines("a: 1\na: 2\n") == {"a": 2}  # the key in effect


@pytest.mark.parametrize(("problem", "shown"), [
    ("server.port: must be between 1 and 65535, got 0",
     "line 2: server.port: must be between 1 and 65535, got 0"),
    ("review.excluded_paths[1]: must be a non-empty string",
     "line 6: review.excluded_paths[1]: must be a non-empty string"),
    # A key the document lacks is shown at its nearest enclosing key.
    ("server.host: must be a string", "line 1: server.host: must be a string"),
    ("budget: required section is missing", "budget: required section is missing"),
    ("the config is empty", "the config is empty"),
])
def test_a_problem_is_shown_at_its_keys_line(problem: str, shown: str) -> None:
    assert at_line(problem, key_lines(DOC)) == shown
