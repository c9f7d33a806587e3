"""A record of every request the simulator received, for assertions about client behaviour.

Credentials never enter the record: the ``Authorization`` header is replaced by its
scheme and a short fingerprint (the first 12 hex digits of SHA-256 of the credential), so
a test can tell that two requests used different tokens without the log holding either.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

REDACTED_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})


def fingerprint(credential: str) -> str:
    """A stable, non-reversible tag for a credential."""
    return hashlib.sha256(credential.encode()).hexdigest()[:12]


def redact_authorization(value: str) -> str:
    scheme, _, credential = value.partition(" ")
    if not credential:
        return f"[redacted {fingerprint(scheme)}]"
    return f"{scheme} [redacted {fingerprint(credential.strip())}]"


@dataclass
class RecordedRequest:
    """One request as received. ``status`` is None for a dropped connection."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names; credentials redacted
    body: bytes
    at: datetime  # simulated clock
    monotonic: float  # host monotonic clock, for spacing assertions
    status: int | None = None
    fault: str | None = None  # what injected fault, if any, answered it
    credential: str | None = field(default=None)  # the fingerprint, never the secret
    #: The route that answered (its template, e.g. ``/repos/{owner}/{repo}/pulls``). The
    #: answer itself is not kept: it can hold a token.
    route: str | None = None

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PATCH", "PUT", "DELETE")


class RequestLog:
    """An append-only list of ``RecordedRequest`` with small query helpers."""

    def __init__(self) -> None:
        self._items: list[RecordedRequest] = []

    def append(self, item: RecordedRequest) -> None:
        self._items.append(item)

    def __iter__(self) -> Iterator[RecordedRequest]:
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index: int) -> RecordedRequest:
        return self._items[index]

    def clear(self) -> None:
        self._items.clear()

    def matching(self, method: str = "*", path_glob: str = "*") -> list[RecordedRequest]:
        """Requests whose method and path match (``*`` in the glob also matches ``/``)."""
        return [
            item
            for item in self._items
            if (method == "*" or item.method == method.upper())
            and fnmatch.fnmatchcase(item.path, path_glob)
        ]

    def writes(self) -> list[RecordedRequest]:
        return [item for item in self._items if item.is_write]


def capture_headers(raw: list[tuple[bytes, bytes]]) -> tuple[dict[str, str], str | None]:
    """Lower-cased headers with credentials redacted, and the credential's fingerprint."""
    headers: dict[str, str] = {}
    credential: str | None = None
    for key_bytes, value_bytes in raw:
        key = key_bytes.decode("latin-1").lower()
        value = value_bytes.decode("latin-1")
        if key == "authorization":
            _, _, secret = value.partition(" ")
            credential = fingerprint((secret or value).strip())
            value = redact_authorization(value)
        elif key in REDACTED_HEADERS:
            value = "[redacted]"
        headers[key] = value
    return headers, credential
