"""The simulator ``Harness`` as fixtures, for the simulator's own tests: ``sim`` (a harness
with its client open) and ``token`` (an installation token of its App). A test module
imports them (and names them in ``__all__``) to use them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.simulator.harness import Harness


@pytest.fixture(name="sim")
async def harness_sim() -> AsyncIterator[Harness]:
    """A ``Harness`` with its client open (import it to use ``sim``)."""
    harness = Harness.create()
    async with harness.client:
        yield harness


@pytest.fixture(name="token")
async def harness_token(sim: Harness) -> str:
    """An installation token of the harness's App (import it to use ``token``)."""
    return await sim.mint_token()
