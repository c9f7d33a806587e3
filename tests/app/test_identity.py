"""Who the App is, as the trigger rules need it: until GitHub names its slug, the App's own
comments are still recognised by its id and Bot authors; the slug, once learnt, adds its
[bot] login."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from service.app.identity import UNKNOWN_SLUG, AppIdentity
from service.config.strict_yaml import load_config
from service.github.client import GitHubClient
from service.intake.rules.classify import classify_event
from service.observe.health import Health
from service.storage.sqlite import SqliteStore
from tests import payloads as p
from tests.webhook_env import write_config


def p_now() -> datetime:
    return datetime.now(UTC)


async def no_sleep(seconds: float) -> None:
    return None


@pytest.mark.anyio
async def test_without_github_the_app_is_still_recognised_by_id_and_bot_type(
        tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path), {})

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with SqliteStore(config.store.path) as store:
        health = Health(store)
        identity = AppIdentity(config, store)
        async with GitHubClient(config.github.api_url, app_jwt=lambda: "jwt",
                                clock=p_now, transport=httpx.MockTransport(refuse),
                                sleep=no_sleep) as github:
            assert await identity.resolve(github, health, p_now) is False

        context = identity.context()
        assert context.app_slug == UNKNOWN_SLUG and identity.slug is None
        assert health.report(p_now())["checks"]["github_auth"]["status"] == "degraded"  # type: ignore[index]
        by_bot = p.issue_comment("@claude review", author=p.bot_user("review-agent", 7))
        via_app = p.issue_comment("@claude review", comment_id=5,
                                  via_app=p.app(config.github.app_id))
        assert classify_event("issue_comment", p.issue_comment_event("created", by_bot),
                              context).reason == "bot_author"  # type: ignore[union-attr]
        assert classify_event("issue_comment", p.issue_comment_event("created", via_app),
                              context).reason == "own_app"  # type: ignore[union-attr]

        identity.learn("review-agent")
        assert identity.context().bot_login == "review-agent[bot]"
