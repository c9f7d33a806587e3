"""A finding's fingerprint: its path, category and the code it points at, normalised —
kept by a line shift, changed by a change of the code."""

from __future__ import annotations

from service.model.fingerprint import fingerprint, pointed_at

CODE = "def load(path):\n    data = open(path).read()\n    return parse(data)\n"


def test_a_line_shift_keeps_the_fingerprint_and_a_code_change_does_not() -> None:
    before = pointed_at(CODE, 2, 2)
    shifted = pointed_at("# a new header\n\n" + CODE, 4, 4)
    assert before == shifted == ["def load(path):", "    data = open(path).read()",
                                 "    return parse(data)"]
    first = fingerprint("src/io.py", "correctness", before)
    assert fingerprint("src/io.py", "correctness", shifted) == first
    assert fingerprint("src/io.py", "correctness",
                       ["def load(path):", "    data = open(path, 'rb').read()",
                        "    return parse(data)"]) != first
    assert fingerprint("src/other.py", "correctness", before) != first
    assert fingerprint("src/io.py", "security", before) != first
    # Re-indenting and blank lines are not a change of code.
    assert fingerprint("src/io.py", "correctness",
                       ["def load(path):", "", "  data =   open(path).read()",
                        "\treturn parse(data)"]) == first


def test_what_a_finding_points_at() -> None:
    assert pointed_at(CODE, 1, 1) == ["def load(path):", "    data = open(path).read()"]
    assert pointed_at(CODE, 2, 3) == ["    data = open(path).read()", "    return parse(data)"]
    assert pointed_at(CODE, 9, 9) == []  # past the end of the file
    assert len(fingerprint("a", "b", [])) == 32
