"""What the metrics tests share: a scrape read into samples, and the app with its admin
routes open (these tests are about what the routes show; the token has its own test)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.webhook_env import Env, open_env

__all__ = ["P", "Samples", "env", "samples"]

P = "pr_review_agent"

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str | bytes) -> Samples:
    """Every sample of a scrape, by name and sorted labels."""
    body = text.decode() if isinstance(text, bytes) else text
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body) for s in family.samples}


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    """The app over a fresh store, its admin routes open."""
    async with open_env(tmp_path, server={"admin": "open"}) as opened:
        yield opened
