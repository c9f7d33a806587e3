"""Fault injection on a schedule a test sets.

A fault sits in front of the whole API, like a misbehaving load balancer: it is matched
before authentication and rate limiting, and a faulted request costs no rate limit.
Faults are checked in the order they were added; the first live match fires.

    world.faults.add(method="GET", path_glob="/repos/*/pulls", status=502, times=3)
    world.faults.slow(path_glob="/repos/*", delay=2.0)            # then answers normally
    world.faults.secondary_limit(method="POST", retry_after=30)
    world.faults.drop(path_glob="/repos/*/pulls/*", kind="remote_protocol")
    world.faults.fail_token_mint(status=500)

``path_glob`` uses ``fnmatch`` on the path without the query string, and ``*`` also
matches ``/``. ``skip`` lets the first N matching requests through; ``times=None``
fires forever.

By default a fault strikes before GitHub does anything. ``applied=True`` models the
other half of real failures: GitHub authenticated, counted and *performed* the request
(the comment exists, the review is posted), and then the answer was lost: replaced by
the fault's status, dropped, or delayed past the client's timeout. This is why a client
must not blindly retry a ``POST`` after a 5xx, a drop or a timeout.

    world.faults.server_error(method="POST", path_glob="/repos/*/comments", applied=True)

Connection drops: in-process (through ``SimulatorTransport``) the transport raises
``httpx.RemoteProtocolError`` ("Server disconnected without sending a response.") or
``httpx.ReadError``; under the standalone server the socket is closed without a byte of
response, which httpx reports the same way.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Literal

DropKind = Literal["remote_protocol", "read_error"]

SECONDARY_LIMIT_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
SECONDARY_LIMIT_DOCS = (
    "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
    "#about-secondary-rate-limits"
)


class ConnectionDropped(Exception):
    """Raised inside the ASGI app to make the in-process transport drop the connection."""

    def __init__(self, kind: DropKind) -> None:
        super().__init__(kind)
        self.kind: DropKind = kind


@dataclass
class Fault:
    method: str = "*"
    path_glob: str = "*"
    status: int | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: DropKind | None = None
    times: int | None = 1
    skip: int = 0
    label: str = "fault"
    applied: bool = False  # the request is performed first; only its answer is lost
    seen: int = 0  # matching requests observed (including skipped ones)
    fired: int = 0

    def __post_init__(self) -> None:
        if self.status is None and self.drop is None and self.delay <= 0:
            raise ValueError("a fault needs a status, a drop or a delay")
        if self.status is not None and self.drop is not None:
            raise ValueError("a fault either answers with a status or drops, not both")
        if self.times is not None and self.times < 1:
            raise ValueError("times must be >= 1 (or None for forever)")
        self.method = self.method.upper()

    def matches(self, method: str, path: str) -> bool:
        return (self.method == "*" or self.method == method.upper()) and fnmatch.fnmatchcase(
            path, self.path_glob
        )

    @property
    def is_slow_only(self) -> bool:
        """A delay that then answers normally (no status, no drop)."""
        return self.status is None and self.drop is None

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def response_body(self) -> Any:
        if self.body is not None:
            return self.body
        if self.status is not None and self.status >= 500:
            return {"message": "Server Error"}
        return {"message": "Injected fault"}


class FaultSchedule:
    """The ordered list of faults; ``take`` is called once per incoming request."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []

    def add(
        self,
        *,
        method: str = "*",
        path_glob: str = "*",
        status: int | None = None,
        body: Any = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        drop: DropKind | None = None,
        times: int | None = 1,
        skip: int = 0,
        label: str = "fault",
        applied: bool = False,
    ) -> Fault:
        fault = Fault(
            method=method, path_glob=path_glob, status=status, body=body,
            headers=dict(headers or {}), delay=delay, drop=drop, times=times, skip=skip,
            label=label, applied=applied,
        )
        self.faults.append(fault)
        return fault

    def server_error(
        self, *, method: str = "*", path_glob: str = "*", status: int = 502,
        times: int | None = 1, skip: int = 0, applied: bool = False,
    ) -> Fault:
        return self.add(method=method, path_glob=path_glob, status=status, times=times,
                        skip=skip, label=f"server_error_{status}", applied=applied)

    def slow(
        self, *, method: str = "*", path_glob: str = "*", delay: float,
        times: int | None = 1, skip: int = 0, applied: bool = False,
    ) -> Fault:
        """Delay matching requests by ``delay`` real seconds, then answer normally
        (with ``applied=True``: perform the request first, then delay its answer)."""
        return self.add(method=method, path_glob=path_glob, delay=delay, times=times,
                        skip=skip, label="slow", applied=applied)

    def secondary_limit(
        self, *, method: str = "*", path_glob: str = "*", retry_after: int | None = 60,
        status: int = 403, times: int | None = 1, skip: int = 0,
    ) -> Fault:
        """GitHub's secondary-limit answer; ``retry_after=None`` omits the header."""
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        body = {"message": SECONDARY_LIMIT_MESSAGE, "documentation_url": SECONDARY_LIMIT_DOCS}
        return self.add(method=method, path_glob=path_glob, status=status, body=body,
                        headers=headers, times=times, skip=skip, label="secondary_limit")

    def drop(
        self, *, method: str = "*", path_glob: str = "*", kind: DropKind = "remote_protocol",
        times: int | None = 1, skip: int = 0, applied: bool = False,
    ) -> Fault:
        return self.add(method=method, path_glob=path_glob, drop=kind, times=times,
                        skip=skip, label=f"drop_{kind}", applied=applied)

    def fail_token_mint(
        self, *, installation_id: int | None = None, status: int = 500,
        times: int | None = 1,
    ) -> Fault:
        target = "*" if installation_id is None else str(installation_id)
        return self.add(method="POST", path_glob=f"/app/installations/{target}/access_tokens",
                        status=status, times=times, label="fail_token_mint")

    def take(self, method: str, path: str) -> Fault | None:
        """The fault that answers this request, if any (consumes one of its firings)."""
        for fault in self.faults:
            if fault.exhausted or not fault.matches(method, path):
                continue
            fault.seen += 1
            if fault.seen <= fault.skip:
                continue
            fault.fired += 1
            return fault
        return None

    def clear(self) -> None:
        self.faults.clear()

    @classmethod
    def fault_from_json(cls, data: dict[str, Any]) -> Fault:
        allowed = {"method", "path_glob", "status", "body", "headers", "delay", "drop",
                   "times", "skip", "label", "applied"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"unknown fault fields: {', '.join(unknown)}")
        return Fault(**data)
