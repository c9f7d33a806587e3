"""A run's content as the store holds it: findings, assessment, description, withheld files
and fixed threads encoded as compact JSON and read back the same; content that is not
what was written is a ValueError naming the column, never a guess."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from service.engine.base import Assessment, Description
from service.publish.run_content import (
    Fixed,
    Omitted,
    encode_assessment,
    encode_description,
    encode_findings,
    encode_fixed,
    encode_omitted,
    parse_assessment,
    parse_description,
    parse_findings,
    parse_fixed,
    parse_omitted,
)
from tests.publisher_rig import (
    ANCHORED,
    UNANCHORED,
)


def test_the_fingerprint_is_stored_with_the_run() -> None:
    marked = replace(ANCHORED, fingerprint="f" * 32)
    (back,) = parse_findings(encode_findings([marked]))
    assert back.fingerprint == "f" * 32 and back == ANCHORED  # not part of equality
    (plain,) = parse_findings(encode_findings([ANCHORED]))
    assert plain.fingerprint is None


def test_every_column_reads_back_what_was_written() -> None:
    findings = (ANCHORED, replace(UNANCHORED, suggestion="def helper():\n    pass\n"))
    assert parse_findings(encode_findings(findings)) == findings
    assessment = Assessment("Adds a cache; one race.", "medium")
    assert parse_assessment(encode_assessment(assessment)) == assessment
    assert encode_assessment(None) is None and parse_assessment(None) is None
    description = Description("Add a cache", "Caches lookups.", ("a.py: cache", "b.py: use"))
    assert parse_description(encode_description(description)) == description
    assert encode_description(None) is None and parse_description(None) is None
    omitted = (Omitted("vendor/x.js", "excluded", 900, "vendor/**"),
               Omitted("big.sql", "max_diff_lines", 12_000))
    assert parse_omitted(encode_omitted(omitted)) == omitted
    assert parse_omitted(None) == ()
    fixed = (Fixed("f" * 32, "PRRT_1"),)
    assert parse_fixed(encode_fixed(fixed)) == fixed
    assert encode_fixed(()) is None and parse_fixed(None) == ()


def test_the_encoding_is_compact_and_keeps_unicode() -> None:
    text = encode_findings([replace(ANCHORED, title="naïve — 漢字")])
    assert ", " not in text and ": " not in text
    assert "naïve — 漢字" in text


@pytest.mark.parametrize(("parse", "text", "why"), [
    (parse_findings, "{}", "runs.findings is not a JSON array"),
    (parse_findings, "[1]", r"runs.findings\[0\] is not an object"),
    (parse_findings, '[{"path": "a"}]', r"runs.findings\[0\]: "),
    (parse_findings, "[", "runs.findings is not valid JSON"),
    (parse_findings, b"[]", "runs.findings is not text"),
    (parse_assessment, "[]", "runs.assessment is not a JSON object"),
    (parse_assessment, '{"summary": "s"}', "runs.assessment: "),
    (parse_description, '{"title": "t", "summary": "s", "changes": "x"}',
     "runs.description: changes is not a list"),
    (parse_omitted, '[{"path": "a", "reason": "too_big"}]',
     r"runs.omitted\[0\].reason must be one of"),
    (parse_omitted, '[{"reason": "excluded"}]', r"runs.omitted\[0\] is not an object with a"),
    (parse_fixed, '[{"fingerprint": "f"}]', "runs.fixed: an entry is not"),
])
def test_content_that_is_not_what_was_written_is_an_error(parse: Any, text: object,
                                                          why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse(text)
