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
from dataclasses import dataclass, field
from typing import Any

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
