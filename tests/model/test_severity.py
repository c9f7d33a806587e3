"""The one severity scale: most serious first, and ``at_least`` reads it that way."""

from __future__ import annotations

import pytest

from service.model.severity import SEVERITIES, at_least


def test_the_scale_is_most_serious_first() -> None:
    assert SEVERITIES == ("critical", "major", "minor", "nit")


@pytest.mark.parametrize(("severity", "threshold", "expected"), [
    ("critical", "major", True), ("major", "major", True), ("minor", "major", False),
    ("nit", "critical", False), ("critical", "nit", True), ("nit", "nit", True),
])
def test_at_least_is_the_threshold_or_more_serious(severity: str, threshold: str,
                                                    expected: bool) -> None:
    assert at_least(severity, threshold) is expected


def test_a_name_off_the_scale_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError):
        at_least("blocker", "major")
