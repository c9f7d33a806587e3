"""GitHub App authentication: the App's JWT and installation tokens (pure of REST calls).

Two credentials exist (reference GITHUB-PLATFORM.md §3):

- The **App JWT** (RS256, signed with the App's private key) proves "I am App N". It is
  used only for ``/app/...`` routes and ``GET /repos/{o}/{r}/installation``. ``iat`` is set
  60 s in the past and ``exp`` 9 minutes ahead, so a host clock up to a minute fast still
  stays under GitHub's 10-minute ceiling.
- An **installation token** (from ``POST /app/installations/{id}/access_tokens``) acts
  for one installation for an hour. ``InstallationTokens`` caches one per installation,
  replaces it at least 5 minutes before it expires, and mints it once however many
  callers ask at the same moment. Tokens are opaque: no length or format is assumed.

Neither credential ever appears in a log line, an exception message or a repr.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from service.config.secret import Secret
from service.github.actors import APP, Actor, Clock
from service.github.errors import GitHubError

__all__ = ["APP", "JWT_BACKDATE", "JWT_LIFETIME", "REFRESH_MARGIN", "Actor", "AppJWT",
           "AppKeyError", "Clock", "InstallationToken", "InstallationTokens",
           "load_private_key", "make_app_jwt", "parse_token_response"]

log = logging.getLogger(__name__)

JWT_BACKDATE: Final = timedelta(seconds=60)
JWT_LIFETIME: Final = timedelta(minutes=9)
REFRESH_MARGIN: Final = timedelta(minutes=5)


class AppKeyError(ValueError):
    """The App's private key could not be used (its content is never in the message)."""


def _require_aware(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("a naive datetime was given where an aware UTC time is required")


def _require_app_id(app_id: int) -> None:
    if isinstance(app_id, bool) or not isinstance(app_id, int) or app_id <= 0:
        raise ValueError("app_id must be a positive integer")


def load_private_key(private_key_pem: str | Secret) -> RSAPrivateKey:
    """Parse the App's PEM private key; ``AppKeyError`` (without the key) when unusable."""
    pem = private_key_pem.reveal() if isinstance(private_key_pem, Secret) else private_key_pem
    try:
        key = serialization.load_pem_private_key(pem.encode("utf-8"), password=None)
    except (ValueError, TypeError, UnicodeError):
        # The library's message is generic, but the chained context could carry input
        # fragments; suppress it so nothing of the key reaches a traceback.
        raise AppKeyError("the GitHub App private key is not a readable PEM key") from None
    if not isinstance(key, RSAPrivateKey):
        raise AppKeyError("the GitHub App private key must be an RSA key (GitHub signs RS256)")
    return key


def _sign(app_id: int, key: RSAPrivateKey, now: datetime) -> str:
    payload = {
        "iat": int((now - JWT_BACKDATE).timestamp()),
        "exp": int((now + JWT_LIFETIME).timestamp()),
        "iss": str(app_id),
    }
    token: str = jwt.encode(payload, key, algorithm="RS256")
    return token


def make_app_jwt(app_id: int, private_key_pem: str, now: datetime) -> str:
    """The App's JWT: RS256, ``iat`` = now − 60 s, ``exp`` = now + 9 min, ``iss`` = App id."""
    _require_app_id(app_id)
    _require_aware(now)
    return _sign(app_id, load_private_key(private_key_pem), now)


class AppJWT:
    """A callable that returns a valid App JWT, re-signing it every few minutes.

    The key is parsed once, at construction, so a bad key fails at start-up rather than
    at the first token mint. A JWT is reused for ``reuse_for`` (default 5 min), leaving
    at least 4 of its 9 minutes for the request (and its retries) that carries it.
    """

    __slots__ = ("_app_id", "_cached", "_clock", "_key", "_reuse_for")

    def __init__(
        self,
        app_id: int,
        private_key: str | Secret,
        clock: Clock,
        *,
        reuse_for: timedelta = timedelta(minutes=5),
    ) -> None:
        _require_app_id(app_id)
        if not timedelta(0) <= reuse_for <= timedelta(minutes=7):
            raise ValueError("reuse_for must be between 0 and 7 minutes")
        self._app_id = app_id
        self._key = load_private_key(private_key)
        self._clock = clock
        self._reuse_for = reuse_for
        self._cached: tuple[datetime, str] | None = None

    @property
    def app_id(self) -> int:
        return self._app_id

    def __call__(self) -> str:
        now = self._clock()
        _require_aware(now)
        if self._cached is not None:
            signed_at, token = self._cached
            if signed_at <= now < signed_at + self._reuse_for:
                return token
        token = _sign(self._app_id, self._key, now)
        self._cached = (now, token)
        return token

    def __repr__(self) -> str:
        return f"AppJWT(app_id={self._app_id}, key=***)"


@dataclass(frozen=True)
class InstallationToken:
    """One installation access token and when it stops working (``token`` never in repr)."""

    installation_id: int
    token: str = field(repr=False)
    expires_at: datetime
    permissions: Mapping[str, str] = field(default_factory=dict)
    repository_selection: str | None = None


def _parse_time(value: object, what: str) -> datetime:
    if not isinstance(value, str):
        raise GitHubError(f"{what} missing from GitHub's response")
    try:
        when = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise GitHubError(f"{what} is not an ISO-8601 time") from None
    if when.tzinfo is None:
        raise GitHubError(f"{what} has no time zone")
    return when


def parse_token_response(installation_id: int, data: object) -> InstallationToken:
    """The body of ``POST .../access_tokens`` as an ``InstallationToken`` (shape-checked)."""
    if not isinstance(data, Mapping):
        raise GitHubError("installation token response is not a JSON object")
    token = data.get("token")
    if not isinstance(token, str) or not token:
        raise GitHubError("installation token response carries no token")
    permissions = data.get("permissions")
    selection = data.get("repository_selection")
    return InstallationToken(
        installation_id=installation_id,
        token=token,
        expires_at=_parse_time(data.get("expires_at"), "installation token expires_at"),
        permissions=dict(permissions) if isinstance(permissions, Mapping) else {},
        repository_selection=selection if isinstance(selection, str) else None,
    )


Mint = Callable[[int], Awaitable[InstallationToken]]


class InstallationTokens:
    """Installation tokens, cached per installation and minted once per need.

    ``token(id)`` returns the cached token while it has more than ``refresh_margin``
    (at least 5 minutes) to live, and otherwise mints a new one through ``mint``. One
    ``asyncio.Lock`` per installation makes concurrent callers wait for a single mint
    rather than each minting their own (single-flight).
    """

    def __init__(
        self, mint: Mint, clock: Clock, *, refresh_margin: timedelta = REFRESH_MARGIN
    ) -> None:
        if not REFRESH_MARGIN <= refresh_margin < timedelta(minutes=55):
            raise ValueError("refresh_margin must be at least 5 minutes and under 55")
        self._mint = mint
        self._clock = clock
        self._margin = refresh_margin
        self._tokens: dict[int, InstallationToken] = {}
        self._locks: dict[int, asyncio.Lock] = {}
        self.mints = 0
        self.last_mint_at: datetime | None = None

    def _fresh(self, token: InstallationToken | None) -> bool:
        return token is not None and self._clock() < token.expires_at - self._margin

    def cached(self, installation_id: int) -> InstallationToken | None:
        """The cached token record, fresh or not (for health checks and tests)."""
        return self._tokens.get(installation_id)

    async def token(self, installation_id: int) -> str:
        """A token for ``installation_id`` with at least ``refresh_margin`` left to live."""
        current = self._tokens.get(installation_id)
        if current is not None and self._fresh(current):
            return current.token
        lock = self._locks.setdefault(installation_id, asyncio.Lock())
        async with lock:
            # Whoever held the lock before us may have minted already.
            current = self._tokens.get(installation_id)
            if current is not None and self._fresh(current):
                return current.token
            minted = await self._mint(installation_id)
            self._tokens[installation_id] = minted
            self.mints += 1
            self.last_mint_at = self._clock()
            log.info(
                "minted installation token",
                extra={
                    "installation_id": installation_id,
                    "expires_at": minted.expires_at.isoformat(),
                },
            )
            if not self._fresh(minted):
                log.warning(
                    "installation token expires within the refresh margin; check the clock",
                    extra={"installation_id": installation_id},
                )
            return minted.token

    def invalidate(self, installation_id: int, token: str) -> None:
        """Forget the cached token if it is ``token`` (GitHub refused it with a 401).

        Comparing first means a caller holding an old token cannot evict the new one
        another caller has just minted.
        """
        current = self._tokens.get(installation_id)
        if current is not None and current.token == token:
            del self._tokens[installation_id]
            log.info(
                "dropped a refused installation token",
                extra={"installation_id": installation_id},
            )
