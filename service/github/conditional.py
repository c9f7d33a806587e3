"""Conditional requests: cache keys that cannot cross tokens, and what rotation costs.

GitHub's ETags are specific to the credential (its responses ``Vary`` on
``Authorization``), and an installation token lives one hour. So the key under which
validators are stored names the token by a fingerprint — the first 16 hex digits of its
SHA-256, which identifies it without revealing it — together with the installation, the
``Accept`` type and the URL::

    gh:v1:i{installation}:{accept} {url}#t{fingerprint}

Everything before ``#`` names the resource; the suffix names the credential. A new token
therefore finds no validators and pays one full 200 per resource, which ``ConditionalStats``
counts apart from a resource's true first request.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from service.model.etags import ETagCache, Validators

log = logging.getLogger(__name__)

FINGERPRINT_HEX_DIGITS = 16


def token_fingerprint(token: str) -> str:
    """A short, non-reversible name for a token (SHA-256 prefix). Never the token itself."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()[:FINGERPRINT_HEX_DIGITS]


def resource_key(installation_id: int, accept: str, url: str) -> str:
    """The token-independent part of a cache key: which resource, in which media type."""
    return f"gh:v1:i{installation_id}:{accept} {url}"


def cache_key(resource: str, fingerprint: str) -> str:
    """The full cache key: the resource plus the fingerprint of the token that fetched it."""
    return f"{resource}#t{fingerprint}"


@dataclass
class ConditionalStats:
    """Counters over conditional GETs since the client started.

    ``sent_validators``: requests that carried ``If-None-Match``/``If-Modified-Since``.
    ``not_modified``: of those, answered 304 (free against the primary limit).
    ``first_requests``: no validators because this process never fetched the resource.
    ``after_rotation``: no validators only because the token changed since the stored
    ones: each is one full 200 that a longer-lived credential would have saved.
    """

    sent_validators: int = 0
    not_modified: int = 0
    first_requests: int = 0
    after_rotation: int = 0

    def snapshot(self) -> ConditionalStats:
        return ConditionalStats(
            sent_validators=self.sent_validators,
            not_modified=self.not_modified,
            first_requests=self.first_requests,
            after_rotation=self.after_rotation,
        )


@dataclass(frozen=True)
class ConditionalResult:
    """The answer to a conditional GET.

    ``not_modified`` is True for a 304: nothing changed since the validators were stored,
    and ``data`` is ``None``. Otherwise ``data`` is the parsed JSON body and ``links`` the
    parsed ``Link`` header (``links.get("next")`` continues a paginated listing).
    """

    status: int
    not_modified: bool
    data: Any = None
    links: dict[str, str] = field(default_factory=dict)
    etag: str | None = None
    last_modified: str | None = None


@dataclass
class Conditional:
    """Per-attempt state of a conditional GET."""

    resource: str = ""
    key: str = ""
    fingerprint: str = ""
    sent: bool = False
    reason: str = ""  # "first" | "rotation" when nothing was sent


class Validating:
    """The validators a conditional GET sends, and what its answer leaves in the cache."""

    def __init__(self, etags: ETagCache) -> None:
        self._etags = etags
        self._last_fingerprint: dict[str, str] = {}  # by resource: the token last used
        self.stats = ConditionalStats()

    def add(self, cond: Conditional, installation_id: int, *, accept: str, url: str,
            token: str, headers: dict[str, str]) -> None:
        """Put the stored validators for ``url`` under ``token`` into ``headers``."""
        cond.resource = resource_key(installation_id, accept, url)
        cond.fingerprint = token_fingerprint(token)
        cond.key = cache_key(cond.resource, cond.fingerprint)
        validators = self._etags.get_validators(cond.key)
        cond.sent = validators is not None
        if validators is None:
            previous = self._last_fingerprint.get(cond.resource)
            cond.reason = "rotation" if previous not in (None, cond.fingerprint) else "first"
            return
        cond.reason = ""
        if validators.etag:
            headers["If-None-Match"] = validators.etag
        if validators.last_modified:
            headers["If-Modified-Since"] = validators.last_modified

    def settle(self, cond: Conditional, response: httpx.Response, path: str) -> None:
        """Count the answer and store its validators (``path``: for the log line)."""
        # Counted once per logical request, on the attempt that produced the answer.
        if cond.sent:
            self.stats.sent_validators += 1
        elif cond.reason == "rotation":
            self.stats.after_rotation += 1
            log.info("conditional GET without validators after token rotation",
                     extra={"url_path": path})
        else:
            self.stats.first_requests += 1
        etag = response.headers.get("etag")
        last_modified = response.headers.get("last-modified")
        if response.status_code == 304:
            self.stats.not_modified += 1
            if etag:  # a 304 may refresh the validator; otherwise keep what we had
                old = self._etags.get_validators(cond.key)
                fresh = Validators(etag, last_modified or (old.last_modified if old else None))
                if fresh != old:  # an unchanged 304 costs no write (a durable cache fsyncs)
                    self._etags.put_validators(cond.key, fresh)
        elif etag or last_modified:
            self._etags.put_validators(cond.key, Validators(etag or "", last_modified))
        self._last_fingerprint[cond.resource] = cond.fingerprint
