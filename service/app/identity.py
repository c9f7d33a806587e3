"""Who the App is, as the trigger rules need it: its id from the config, its slug from
GitHub (``GET /app``), learnt in the background so webhooks are taken meanwhile."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

import anyio
import httpx

from service.config.repository.merge import RepoTriggers
from service.config.schema import Config
from service.github.actors import APP
from service.github.client import GitHubClient
from service.github.errors import GitHubError
from service.github.ratelimit import RetryPolicy
from service.intake.rules.decisions import TriggerContext
from service.observe.health import Health
from service.storage.agent_comments import AgentComments
from service.storage.database import Database

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: A slug no GitHub login can have (logins are letters, digits and '-'), used until the
#: real one is known: the "[bot]"-login rule then matches nobody and the App-id and
#: Bot-author rules do the work.
UNKNOWN_SLUG: Final = "slug-not-yet-known!"
SLUG_TIMEOUT: Final = 15.0
SLUG_RETRY: Final = timedelta(minutes=5)
SLUG_POLICY: Final = RetryPolicy(server_retries=1, rate_limit_retries=0,
                                    backoff_base=0.5, backoff_cap=1.0)


class AppIdentity:
    """The App as the trigger rules see it; ``context()`` is ``create_app``'s factory."""

    def __init__(self, config: Config, store: Database, *,
                 repo_triggers: Callable[[str], RepoTriggers] | None = None) -> None:
        self._config = config
        self._agent_comments = AgentComments(store)
        self._repo_triggers = repo_triggers
        self._context = self._build(UNKNOWN_SLUG)
        self.slug: str | None = None

    def _build(self, slug: str) -> TriggerContext:
        return TriggerContext(config=self._config.triggers, app_id=self._config.github.app_id,
                              app_slug=slug, agent_comments=self._agent_comments,
                              decline_phrases=self._config.review.decline_phrases,
                              repo_triggers=self._repo_triggers)

    def context(self) -> TriggerContext:
        return self._context

    def learn(self, slug: str) -> None:
        """Adopt the App's slug (as GitHub reports it)."""
        self._context = self._build(slug)
        self.slug = slug

    async def resolve(self, github: GitHubClient, health: Health, clock: Clock) -> bool:
        """``GET /app`` once; True when the slug is now known. Never raises for GitHub."""
        try:
            with anyio.fail_after(SLUG_TIMEOUT):
                data = await github.get_json(APP, "/app")
        except (GitHubError, TimeoutError, httpx.HTTPError) as exc:
            reason = f"GET /app failed: {exc}" if isinstance(exc, GitHubError) else (
                f"GET /app failed: {type(exc).__name__}")
            health.auth_failed(clock(), reason)
            log.warning("cannot learn the App's slug from GitHub; recognising the App's own "
                        "comments by App id and Bot authors until it is known",
                        extra={"error": reason, "api_url": github.api_url})
            return False
        slug = data.get("slug") if isinstance(data, dict) else None
        if not isinstance(slug, str) or not slug.strip() or slug != slug.strip():
            health.auth_failed(clock(), "GET /app answered without a slug")
            log.warning("GET /app answered without a usable slug")
            return False
        health.auth_succeeded(clock(), "app jwt")
        self.learn(slug)
        log.info("App identified", extra={"app_id": self._config.github.app_id, "slug": slug})
        return True

    async def keep_resolving(self, config: Config, health: Health, clock: Clock,
                             transport: httpx.AsyncBaseTransport | None = None) -> None:
        """``resolve`` now, then every ``SLUG_RETRY`` until it succeeds.

        Each attempt uses a client of its own with a short retry policy, so a GitHub that is
        down costs a second, not the patient back-off the shared client uses for reviews.
        """
        while True:
            async with GitHubClient.from_config(config.github, clock=clock, transport=transport,
                                                policy=SLUG_POLICY) as github:
                if await self.resolve(github, health, clock):
                    return
            await anyio.sleep(SLUG_RETRY.total_seconds())
