"""The engine's contract: what a finding, an assessment and a description may be (a model
that answers otherwise is refused field by field), and how the usage of a run's calls
adds up."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from service.budget.usage import Usage
from service.engine.base import (
    Assessment,
    Description,
    Finding,
    combine_usage,
    estimate_tokens,
    no_usage,
    unknown_usage,
)

GOOD = Finding(path="src/app.py", line=3, side="RIGHT", start_line=2, severity="major",
               category="correctness", title="json is imported twice",
               body="The second import shadows the first.")


@pytest.mark.parametrize(("changes", "why"), [
    ({"path": "/etc/passwd"}, "finding path"),
    ({"path": ""}, "finding path"),
    ({"line": 0}, "finding line must be a positive integer"),
    ({"line": True}, "finding line must be a positive integer"),
    ({"side": "MIDDLE"}, "finding side must be one of"),
    ({"start_line": 4}, "finding start_line must be a positive integer no greater"),
    ({"severity": "blocker"}, "finding severity must be one of"),
    ({"category": "vibes"}, "finding category must be one of"),
    ({"title": "  "}, "finding title must not be empty"),
    ({"body": ""}, "finding body must not be empty"),
])
def test_a_finding_that_cannot_be_posted_is_refused(changes: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        replace(GOOD, **changes)


def test_assessments_and_descriptions_are_refused_field_by_field() -> None:
    assert Assessment("Fine.", "low").risk == "low"
    with pytest.raises(ValueError, match="assessment risk must be one of"):
        Assessment("Fine.", "catastrophic")
    with pytest.raises(ValueError, match="assessment summary must not be empty"):
        Assessment(" ", "low")
    assert Description("Add a cache", "Caches lookups.", ("a.py",)).changes == ("a.py",)
    with pytest.raises(ValueError, match="description title must not be empty"):
        Description("", "s", ())
    with pytest.raises(ValueError):
        Description("t", "s", ("",))


def test_the_usage_of_a_runs_calls_adds_up_and_an_unknown_part_makes_it_unknown() -> None:
    first = Usage(1000, "exact", "anthropic", "configured-model")
    second = Usage(500, "estimated", "anthropic", "served-model")
    both = combine_usage(first, second)
    assert (both.tokens, both.confidence, both.model) == (1500, "estimated", "served-model")
    lost = combine_usage(first, unknown_usage("anthropic", None))
    assert (lost.tokens, lost.confidence) == (None, "unavailable")
    assert no_usage("claude_code", None) == Usage(0, "exact", "claude_code", None)


def test_a_rough_count_is_a_token_per_four_characters_rounded_up_per_text() -> None:
    assert estimate_tokens() == 0
    assert estimate_tokens("abcd", "e") == 2
    assert estimate_tokens("x" * 4001) == 1001
