"""What a check run says, in each state a trigger can be in: queued and waiting with when
it runs by itself, in progress, and each ending with its conclusion — never a success for
something that was not reviewed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from service.publish.checks import text

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HEAD = "c0ffee" + "0" * 34


def test_waiting_says_why_and_when_it_runs_by_itself() -> None:
    state = text.waiting_for_budget("review", "exhausted", "session",
                                    NOW + timedelta(minutes=45), NOW)
    assert state.status == "queued"
    assert state.title == ("Waiting for budget: the session window frees allowance at "
                           "2026-06-01 12:45 UTC")
    assert "the session window's token allowance is used up" in state.summary
    assert "(in about 45 minutes)" in state.summary and "Nothing is lost" in state.summary
    unknown = text.waiting_for_budget("review", "something new", None, None, NOW)
    assert unknown.title == "Waiting for budget"
    assert "the token budget does not allow another run yet" in unknown.summary
    plan = text.waiting_for_plan("description", NOW + timedelta(hours=5), NOW)
    assert plan.title == "Waiting for the plan's usage limit to reset at 2026-06-01 17:00 UTC"
    assert "(in about 5 hours)" in plan.summary
    retry = text.waiting_for_retry("review", "timeout", attempts=1, max_attempts=3,
                                   retry_at=None, now=NOW)
    assert retry.title == "Retrying: attempt 1 of 3 did not finish"
    assert retry.summary.endswith("tried again as soon as a worker is free.")


def test_in_progress_names_the_head_and_the_attempt() -> None:
    assert text.reviewing("review", HEAD, 1).title == "Reviewing c0ffee0"
    assert text.reviewing("description", HEAD, 3).title == "Describing c0ffee0 (attempt 3)"
    assert text.queued("review").status == "queued"


@pytest.mark.parametrize(("severities", "fail_on", "conclusion", "title"), [
    ((), "major", "success", "Reviewed: no findings"),
    (("minor", "nit", "nit"), "major", "success", "Reviewed: 1 minor, 2 nits"),
    (("major", "nit"), "major", "failure", "Reviewed: 1 major, 1 nit"),
    (("critical",), None, "success", "Reviewed: 1 critical"),
])
def test_a_review_concludes_by_its_findings_and_the_gate(severities: tuple[str, ...],
                                                         fail_on: str | None,
                                                         conclusion: str, title: str) -> None:
    state = text.reviewed(severities, tokens=1200, cost_usd=None, url=None, fail_on=fail_on)
    assert (state.status, state.conclusion, state.title) == ("completed", conclusion, title)
    assert ("**Failing:**" in state.summary) is (conclusion == "failure")


def test_a_reduced_or_partial_review_says_so() -> None:
    state = text.reviewed((), tokens=10, cost_usd=None, url="https://x/r/1", fail_on=None,
                          reduced=True)
    assert "**Reduced:**" in state.summary and state.details_url == "https://x/r/1"


def test_endings_that_are_not_a_review_are_never_a_success() -> None:
    for state in (text.abandoned("timeout", 3), text.superseded(HEAD),
                  text.closed(merged=True), text.moved(HEAD),
                  text.declined_by_repository("auto_review: false", "@claude")):
        assert state.status == "completed" and state.conclusion != "success", state.title


def test_a_broken_repository_config_is_shown_on_every_check_run() -> None:
    state = text.with_config_notes(text.queued("review"), tuple(f"note {i}" for i in range(30)))
    assert "**Repository config**" in state.summary and "- note 0" in state.summary
    assert "more (`pr-review-agent check-config --repository-file` lists them all)" in (
        state.summary)
    assert text.with_config_notes(text.queued("review"), ()) == text.queued("review")
