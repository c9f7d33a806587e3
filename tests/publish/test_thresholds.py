"""Precision over volume: ``min_severity`` and ``max_findings`` keep the most serious
findings, and what they keep back is counted in the review body, never dropped silently."""

from __future__ import annotations

from dataclasses import replace

import pytest

from service.config.posting import ChecksConfig
from service.config.repository.keys import RepoSettings
from service.config.repository.merge import Effective
from service.config.schema import ReviewConfig
from service.engine.base import Finding
from service.publish import compose
from service.publish.thresholds import limits, not_shown_line, thresholds
from tests.publisher_rig import (
    ANCHORED,
    UNANCHORED,
    Rig,
    publication,
    publisher_rig,  # noqa: F401 - the `rig` fixture
)


def finding(severity: str, n: int) -> Finding:
    return replace(UNANCHORED, severity=severity, title=f"{severity} {n}")  # type: ignore[arg-type]


FOUR = (finding("nit", 1), finding("major", 2), finding("minor", 3), finding("critical", 4))


def titles(findings: tuple[Finding, ...]) -> list[str]:
    return [f.title for f in findings]


def test_min_severity_keeps_those_at_or_above_it_in_their_order() -> None:
    kept = thresholds(publication(findings=FOUR), "major", 100)
    assert titles(kept.findings) == ["major 2", "critical 4"]
    assert kept.not_shown == (("minor", 1), ("nit", 1))


def test_max_findings_keeps_the_most_serious() -> None:
    kept = thresholds(publication(findings=FOUR), "nit", 2)
    assert titles(kept.findings) == ["major 2", "critical 4"]
    many = thresholds(publication(findings=(finding("minor", 1), finding("minor", 2),
                                            finding("minor", 3))), "nit", 2)
    assert titles(many.findings) == ["minor 1", "minor 2"]  # the engine's order among equals
    assert many.not_shown == (("minor", 1),)


def test_nothing_held_back_leaves_the_publication_alone() -> None:
    pub = publication(findings=FOUR)
    assert thresholds(pub, "nit", 100) is pub
    assert not_shown_line(pub) is None


def test_the_body_counts_what_is_not_shown() -> None:
    kept = thresholds(publication(findings=FOUR), "critical", 100)
    assert not_shown_line(kept) == (
        "1 more major finding, 1 more minor note and 1 more nit not shown (below the minimum "
        "severity posted, or past the number of findings posted: `min_severity`, "
        "`max_findings`).")
    body = compose.review(kept, (), kept.findings, phrase="@claude").body
    assert "1 more minor note" in body and "No findings." not in body
    only_nits = thresholds(publication(findings=(finding("nit", 1), finding("nit", 2))),
                           "minor", 100)
    assert "2 more nits not shown" in compose.review(only_nits, (), (), phrase="@claude").body


def test_the_repositorys_thresholds_win_over_the_operators() -> None:
    operator = ReviewConfig(min_severity="minor", max_findings=10)
    assert limits(operator, Effective()) == ("minor", 10)
    assert limits(operator, Effective(settings=RepoSettings(min_severity="major"))) == (
        "major", 10)
    assert limits(operator, Effective(settings=RepoSettings(max_findings=3))) == ("minor", 3)
    assert ChecksConfig().fail_on is None


@pytest.mark.anyio
async def test_a_review_posts_only_what_the_thresholds_keep(rig: Rig) -> None:
    pr = rig.add_pull()
    run = rig.record(rig.ask(pr), findings=(ANCHORED, UNANCHORED))  # major inline, minor
    publisher = rig.publisher(review=lambda: ReviewConfig(min_severity="major"))
    result = await publisher.publish_key(run.dedupe_key)
    assert result.status == "published"
    (review,) = rig.reviews(pr)
    assert [c.body for c in rig.inline(pr)] and len(rig.inline(pr)) == 1
    assert "1 more minor note not shown" in review.body
    assert UNANCHORED.title not in review.body
    check = rig.row("checks", "dedupe_key = ?", run.dedupe_key)
    assert check["title"] == "Reviewed: 1 major"  # the check run counts what was posted
