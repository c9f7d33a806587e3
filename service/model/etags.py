"""The conditional-request cache: what the GitHub client needs to send If-None-Match.

A lost entry costs one full GET on the next request, never correctness, which is why
the in-memory ``ETagStore`` is a valid cache and ``Database`` is merely a durable one.
Keys are built by the client (including whatever makes a rotated token miss rather than
be served another token's validators). One rule of the protocol reads them: a key may end
in a variant after its last ``#`` (the token's fingerprint), and storing an entry replaces
every other variant of the same resource (the part before that ``#``). Without it, each
hourly token rotation would leave one dead entry per polled resource behind, forever.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Validators:
    """What GitHub returned for a resource: its ``ETag`` and, where given, ``Last-Modified``."""

    etag: str
    last_modified: str | None = None


class ETagCache(Protocol):
    def get_validators(self, key: str) -> Validators | None: ...

    def put_validators(self, key: str, validators: Validators) -> None: ...


class ETagStore:
    """The in-memory ``ETagCache``: a one-shot poll, and the tests."""

    def __init__(self) -> None:
        self._entries: dict[str, Validators] = {}
        self._lock = threading.Lock()

    def get_validators(self, key: str) -> Validators | None:
        with self._lock:
            return self._entries.get(key)

    def put_validators(self, key: str, validators: Validators) -> None:
        resource = resource_of(key)
        with self._lock:
            for stale in [k for k in self._entries if k != key and resource_of(k) == resource]:
                del self._entries[stale]
            self._entries[key] = validators


def resource_of(key: str) -> str:
    """The resource a cache key names: the key up to its last ``#``, or all of it."""
    head, sep, _ = key.rpartition("#")
    return head if sep else key
