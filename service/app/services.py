"""What every component of one process shares (``Services``), and the redactor its GitHub
client is built with. The composition root (``daemon``) makes them; the runners use them,
without importing the root back."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from service.app.identity import AppIdentity
from service.app.shutdown import Shutdown
from service.app.web import InstallationChange
from service.budget.governor import Governor
from service.config.redact import Redactor
from service.config.schema import Config
from service.github.client import GitHubClient
from service.observe.health import Health
from service.observe.metrics.instruments import Metrics
from service.review.repository_config import RepositoryConfigs
from service.runtime.nap import Bell
from service.storage.database import Database
from service.storage.queue_lease import Leasing

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The production clock: aware UTC now (read only by the composition root)."""
    return datetime.now(UTC)


@dataclass
class Services:
    """What every component of one process shares."""

    config: Config
    store: Database
    leasing: Leasing
    governor: Governor
    health: Health
    identity: AppIdentity
    github: GitHubClient
    clock: Clock
    sockets: list[socket.socket] = field(default_factory=list)
    #: Set by a second SIGTERM/SIGINT: stop now, without waiting for open connections
    #: or for running jobs (the workers cancel them, which hands their rows back).
    force: asyncio.Event = field(default_factory=asyncio.Event)
    #: Rung after anything in this process enqueued work: the workers, the early 👀 and
    #: the check runs answer it (``wake``).
    queued: Bell = field(default_factory=lambda: Bell("queued"))
    #: Rung (on the event loop) after an installation webhook changed ``repositories``
    #: (with the ``InstallationChange``): a poller in this process answers it with a refresh.
    installations: Bell = field(default_factory=lambda: Bell("installations"))
    #: What the engine's scrubbed environment is drawn from (credentials by name).
    environ: Mapping[str, str] = field(default_factory=dict)
    #: The repositories' own config files (``.github/pr-review-agent.yml``); None: only the
    #: operator's config applies (the tools that review one pull request by hand).
    repo_configs: RepositoryConfigs | None = None
    #: This process's counters and histograms (``GET /metrics``).
    metrics: Metrics = field(default_factory=Metrics)
    #: ``serve``'s signal handling, told when the web server serves (uvicorn takes the
    #: signals then too); None where nothing handles signals (a test, ``review``).
    shutdown: Shutdown | None = None

    def installation_changed(self, change: InstallationChange) -> None:
        """The web receiver's ``on_installation_change``: logged, then rung."""
        log.info("installation changed", extra={
            "installation_id": change.installation_id, "action": change.action,
            "added": list(change.added), "removed": list(change.removed)})
        self.installations.ring(change)


def service_redactor(config: Config, environ: Mapping[str, str]) -> Redactor:
    """What every write to GitHub is cleaned of: credential shapes, the App's key, the
    webhook secrets, the admin token and the engine's credentials."""
    gh, engine = config.github, config.engine
    names = [*engine.credential_env, *([engine.api_key_env] if engine.api_key_env else [])]
    if engine.kind == "anthropic" and not engine.api_key_env:
        names.append("ANTHROPIC_API_KEY")
    return Redactor.for_service(
        gh.private_key.reveal(),
        [s.reveal() for s in gh.webhook_secrets]
        + ([config.server.admin_token.reveal()] if config.server.admin_token else []),
        environ, names)
