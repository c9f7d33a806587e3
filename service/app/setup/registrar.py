"""The manifest flow's server side: start a registration, then complete it from GitHub's code.

``start`` issues a random ``state`` (kept in memory for an hour, GitHub's limit for the
whole flow) and returns where to post the manifest. ``complete`` checks the ``state`` that
came back, converts the one-time ``code`` with ``POST {api_url}/app-manifests/{code}/
conversions``, writes the private key and webhook secret (files.py), writes the App id and
the key paths into the config, and loads the result with the ordinary loader. Nothing it
raises or logs holds a secret: ``RegistrationError`` messages are written for the page.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import httpx

from service.app.setup.files import key_paths, with_credentials, write_config, write_private
from service.app.setup.manifest import build_manifest, install_url, registration_url
from service.config.errors import ConfigError
from service.config.schema import Config
from service.config.strict_yaml import load_config
from service.github.urls import web_url_for

__all__ = ["Registered", "Registrar", "RegistrationError", "Started"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]

#: GitHub: "You must complete all three steps in the GitHub App Manifest flow within one
#: hour." A state older than that could only meet an expired code.
STATE_TTL: Final = timedelta(hours=1)
#: Registrations started and not yet completed; more is someone reloading a page in a loop.
MAX_PENDING: Final = 100
CONVERSION_TIMEOUT: Final = 30.0
_CODE: Final = re.compile(r"[A-Za-z0-9._-]{1,200}")


class RegistrationError(Exception):
    """Why a registration could not complete, in words for the operator's page.

    ``status`` is the HTTP status the page answers with. The message never holds a secret.
    """

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Started:
    """A registration on its way to GitHub: post ``manifest`` (JSON) to ``action``."""

    action: str
    manifest: dict[str, Any]
    state: str


@dataclass(frozen=True)
class Registered:
    """A completed registration. Holds no secret: those are in the files it names."""

    app_id: int
    slug: str
    name: str
    html_url: str
    install_url: str
    key_file: Path
    secret_file: Path
    config: Config


@dataclass(frozen=True)
class _Pending:
    created_at: datetime
    org: str | None


class Registrar:
    """One process's registrations, from ``start`` to at most one successful ``complete``.

    ``pending`` is the config that ``MissingCredentials`` carried (its ``github.api_url``
    says which GitHub to talk to); ``transport`` reaches GitHub (tests pass the
    simulator's); ``clock`` returns aware UTC now.
    """

    def __init__(self, config_path: Path, pending: Config, *, public_url: str,
                 environ: Mapping[str, str], clock: Clock,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config_path = config_path
        self.api_url = pending.github.api_url
        self.web_url = web_url_for(self.api_url)
        self.public_url = public_url
        self.webhook_url = f"{public_url}{pending.server.webhook_path}"
        self._environ = environ
        self._clock = clock
        self._transport = transport
        self._pending: dict[str, _Pending] = {}
        self._lock = asyncio.Lock()
        self.registered: Registered | None = None

    def start(self, org: str | None, webhook_url: str | None = None) -> Started:
        """A new ``state`` and the manifest to post, for the personal account or ``org``."""
        if self.registered is not None:
            raise RegistrationError("The App is already registered.", status=409)
        now = self._clock()
        self._forget_expired(now)
        if len(self._pending) >= MAX_PENDING:
            raise RegistrationError("Too many registrations were started and not finished; "
                                    "restart the service to begin again.", status=429)
        state = secrets.token_urlsafe(32)
        try:
            action = registration_url(self.web_url, state, org)
        except ValueError:
            raise RegistrationError("That is not a GitHub organisation name.") from None
        self._pending[state] = _Pending(created_at=now, org=org)
        return Started(action=action, state=state,
                       manifest=build_manifest(self.public_url, webhook_url or self.webhook_url))

    def _forget_expired(self, now: datetime) -> None:
        for state, pending in list(self._pending.items()):
            if now - pending.created_at > STATE_TTL:
                del self._pending[state]

    async def complete(self, code: str, state: str) -> Registered:
        """Finish the registration that ``state`` started, with GitHub's ``code``."""
        async with self._lock:  # a double-clicked callback converts the code once
            if self.registered is not None:
                raise RegistrationError("The App is already registered.", status=409)
            self._forget_expired(self._clock())
            # The state is checked before the code is used: a code that arrives with a
            # state this process did not issue is never converted.
            if not state or self._pending.pop(state, None) is None:
                raise RegistrationError(
                    "This registration was not started by this server, or it is more than "
                    "an hour old (or the service restarted since). If GitHub has just created "
                    "an App, delete it under Settings → Developer settings → GitHub Apps, "
                    "and register again from this server's page.")
            if not _CODE.fullmatch(code):
                raise RegistrationError("GitHub's redirect carried no usable code.")
            app = await self._convert(code)
            self.registered = self._save(app)
            self._pending.clear()
            return self.registered

    async def _convert(self, code: str) -> dict[str, Any]:
        url = f"{self.api_url}/app-manifests/{quote(code, safe='')}/conversions"
        headers = {"Accept": "application/vnd.github+json",
                   "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "pr-review-agent"}
        try:
            async with httpx.AsyncClient(transport=self._transport,
                                         timeout=CONVERSION_TIMEOUT) as client:
                response = await client.post(url, headers=headers)
        except httpx.HTTPError as exc:
            raise RegistrationError(f"Cannot reach GitHub at {self.api_url} "
                                    f"({type(exc).__name__}). Start again.", 502) from None
        if response.status_code == 404:
            raise RegistrationError("GitHub did not accept the code: a code works once, "
                                    "within an hour. Start again.", 502)
        if response.status_code != 201:
            raise RegistrationError(f"GitHub answered {response.status_code} to the "
                                    "conversion of the code. Start again.", 502)
        try:
            app = response.json()
        except ValueError:
            app = None
        if not isinstance(app, dict):
            raise RegistrationError("GitHub's answer to the conversion was not JSON.", 502)
        return app

    def _save(self, app: dict[str, Any]) -> Registered:
        app_id, slug, pem, hook_secret = (app.get("id"), app.get("slug"), app.get("pem"),
                                          app.get("webhook_secret"))
        if isinstance(app_id, bool) or not isinstance(app_id, int) or app_id < 1 \
                or not isinstance(slug, str) or not isinstance(pem, str):
            raise RegistrationError("GitHub's answer lacked the App's id, slug or key.", 502)
        html_url = app.get("html_url")
        if not isinstance(html_url, str) or not html_url.startswith(("https://", "http://")):
            html_url = f"{self.web_url}/apps/{slug}"
        if not isinstance(hook_secret, str) or not hook_secret:
            raise RegistrationError(
                f"GitHub created the App (id {app_id}) without a webhook secret. Set one "
                f"in the App's settings ({html_url}) and name its file in the config's "
                "github.webhook_secret_file.", 502)
        key_file, secret_file = key_paths(self.config_path, app_id)
        relative = self.config_path.parent
        try:
            write_private(key_file, pem)
            write_private(secret_file, hook_secret)
            text = self.config_path.read_text(encoding="utf-8")
            write_config(self.config_path, with_credentials(
                text, app_id, str(key_file.relative_to(relative)),
                str(secret_file.relative_to(relative))))
        except (OSError, ValueError) as exc:
            log.error("cannot save the registered App's credentials",
                      extra={"app_id": app_id, "error": type(exc).__name__,
                             "config": str(self.config_path)})
            raise RegistrationError(
                f"GitHub created the App {slug} (id {app_id}), but its credentials could not "
                f"be saved beside {self.config_path} ({type(exc).__name__}). Generate a new "
                f"private key on {html_url}, and set the webhook secret there too.",
                500) from None
        try:
            config = load_config(self.config_path, self._environ)
        except ConfigError as exc:
            raise RegistrationError(
                f"The App {slug} (id {app_id}) is registered and its credentials are saved, "
                f"but {self.config_path} does not load: " + "; ".join(exc.problems),
                500) from None
        log.info("GitHub App registered", extra={
            "app_id": app_id, "slug": slug, "config": str(self.config_path),
            "key_file": str(key_file)})
        name = app.get("name")
        return Registered(app_id=app_id, slug=slug,
                          name=name if isinstance(name, str) and name else slug,
                          html_url=html_url, install_url=install_url(html_url),
                          key_file=key_file, secret_file=secret_file, config=config)
