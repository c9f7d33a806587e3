"""Shared fixtures. Keep this small: module-specific fixtures live beside their tests."""

from collections.abc import Iterator

import pytest

from tests.simulator.openapi import checker


@pytest.fixture(autouse=True)
def _the_simulator_answers_in_githubs_shapes() -> Iterator[None]:
    """Fail a test during which the GitHub simulator served a response that GitHub's own
    REST description rejects (tests/simulator/openapi): a client that passes against the
    simulator has met GitHub's shapes too."""
    before = len(checker.PROBLEMS)
    yield
    found = checker.PROBLEMS[before:]
    if found:
        shown = "\n".join(found[:20]) + (f"\n… and {len(found) - 20} more" if len(found) > 20
                                          else "")
        pytest.fail("the simulator served shapes GitHub's description rejects:\n" + shown,
                    pytrace=False)
