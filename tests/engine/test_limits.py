"""Claude's plan-limit messages recognised in every wording the CLI has used, a transient
429 not taken for one, and the reset time read where the message says it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from service.engine.limits import is_usage_limit_text, reset_time

NOW = datetime(2026, 3, 25, 23, 30, tzinfo=UTC)


def test_reset_time_forms() -> None:
    assert reset_time("Claude AI usage limit reached|1767225600", NOW) == datetime(
        2026, 1, 1, tzinfo=UTC)
    # 23:30 UTC is 00:30 in Berlin on the 26th; "2am" is later that night.
    assert reset_time("You've hit your limit · resets 2am (Europe/Berlin)", NOW) == datetime(
        2026, 3, 26, 1, 0, tzinfo=UTC)
    # 1pm Lisbon (UTC+0 in March) already passed today: tomorrow.
    assert reset_time("resets 1pm (Europe/Lisbon)", NOW) == datetime(
        2026, 3, 26, 13, 0, tzinfo=UTC)
    assert reset_time("resets 12:15am (UTC)", NOW) == datetime(2026, 3, 26, 0, 15, tzinfo=UTC)
    assert reset_time("You've hit your weekly limit · resets Tuesday", NOW) is None
    assert reset_time("resets 5am", NOW) is None  # no zone: cannot place it
    assert reset_time("resets 5am (Mars/Olympus)", NOW) is None
    with pytest.raises(ValueError, match="aware"):
        reset_time("x", datetime(2026, 1, 1))


@pytest.mark.parametrize(("text", "is_limit"), [
    ("You've hit your limit · resets 2am (Europe/Berlin)", True),
    ("You're out of extra usage · resets 1pm (America/Los_Angeles)", True),
    ("Claude AI usage limit reached|1767225600", True),
    ("5-hour limit reached ∙ resets 5am", True),
    ("Your org is out of usage · add funds to continue", True),
    ("API Error: Rate limit reached", False),
    ("API Error: Request rejected (429) · try again", False),
    ("API Error: 529 Overloaded. This is a server-side issue", False),
])
def test_usage_limit_texts(text: str, is_limit: bool) -> None:
    assert is_usage_limit_text(text) is is_limit


# --- folding ----------------------------------------------------------------------------
