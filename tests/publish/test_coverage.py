"""What a review read, in the words every post uses (``publish.coverage``)."""

from __future__ import annotations

from service.publish import coverage
from service.publish.checks import text
from service.publish.run_content import Coverage, Omitted


def omitted(*reasons: str) -> tuple[Omitted, ...]:
    return tuple(Omitted(f"f{i}.py", r, 10) for i, r in enumerate(reasons))  # type: ignore[arg-type]


def test_a_partial_review_says_how_much_it_read_and_why_not_the_rest() -> None:
    left = omitted("generated", "generated", "generated", *["over_window"] * 5)
    said = coverage.sentence(Coverage(files=50, reviewed=42, parts=3,
                                      pruned=("12 hunks that only delete lines",)), left)
    assert said == ("Reviewed 42 of 50 files (8 not reviewed: 3 generated, 5 over the "
                    "model's window — listed below). The change is larger than the model's "
                    "window, so it was read in 3 parts. To fit, the diff sent left out 12 "
                    "hunks that only delete lines.")
    assert coverage.title(Coverage(files=50, reviewed=42), left) == "Reviewed 42 of 50 files"


def test_files_the_operator_excluded_do_not_make_a_review_partial() -> None:
    left = omitted("excluded", "excluded")
    assert not coverage.partial(left)
    assert coverage.title(Coverage(files=5, reviewed=3), left) is None
    # Counted and listed all the same.
    assert coverage.sentence(Coverage(files=5, reviewed=3), left) is None
    assert coverage.sentence(Coverage(files=5, reviewed=5), ()) is None


def test_a_run_recorded_before_coverage_was_kept_still_says_what_it_left_out() -> None:
    assert coverage.sentence(None, omitted("max_diff_lines")) == (
        "1 file(s) not reviewed: 1 over review.max_diff_lines — listed below.")
    assert coverage.title(None, omitted("max_diff_lines")) == (
        "Partly reviewed (1 file(s) not read)")


def test_every_reason_a_file_is_not_read_has_words() -> None:
    from service.publish.run_content import OMIT_REASONS
    assert set(coverage.REASONS) == set(OMIT_REASONS)
    assert set(coverage.WHY) == set(OMIT_REASONS) - {"excluded", "max_diff_lines"}


def test_a_partial_review_is_never_a_plain_green_reviewed() -> None:
    left = omitted("over_window")
    heading = coverage.title(Coverage(files=2, reviewed=1), left)
    assert heading is not None
    state = text.reviewed((), tokens=10, cost_usd=None, url=None, fail_on=None,
                          coverage=(heading, "Reviewed 1 of 2 files."))
    assert (state.conclusion, state.title) == ("neutral", "Reviewed 1 of 2 files: no findings")
    assert "**Partial:** Reviewed 1 of 2 files." in state.summary
    green = text.reviewed((), tokens=10, cost_usd=None, url=None, fail_on=None,
                          coverage=(heading, "x"), partial_conclusion="success")
    assert green.conclusion == "success" and green.title.startswith("Reviewed 1 of 2")
    failing = text.reviewed(["major"], tokens=10, cost_usd=None, url=None, fail_on="major",
                            coverage=(heading, "x"))
    assert failing.conclusion == "failure"


def test_nothing_read_is_not_reviewed_and_says_why() -> None:
    state = text.nothing_to_review(omitted("over_window", "over_window", "lock_file"), None)
    assert (state.conclusion, state.title) == ("neutral", "Not reviewed: 0 of 3 files read")
    assert "2 over the model's window, 1 lock file" in state.summary
    excluded = text.nothing_to_review(omitted("excluded"), None)
    assert excluded.title == "Not reviewed: nothing left after exclusions"
