"""The App's webhook delivery log, as GitHub keeps it, and its three endpoints.

Every attempt to deliver an event to the App's webhook is an entry: its own ``id``
(increasing), the event's ``guid`` (the ``X-GitHub-Delivery`` header, shared by every
attempt of one event), when, whether it was a redelivery, and how it went — ``status``
``"OK"`` for a 2xx, ``"Invalid HTTP Response: 503"``, ``"timed out"`` (GitHub gave up
after 10 s, whatever the App did with it) or ``"failed to connect to host"`` (nothing
reached the App). GitHub keeps entries for 3 days (``Settings.hook_log_days``; 7 on
GHES) and answers, as the App (JWT):

- ``GET /app/hook/deliveries``: newest first, ``per_page`` (max 100), ``cursor``
  pagination through ``Link`` (``rel="next"``), ``status=success|failure``;
- ``GET /app/hook/deliveries/{id}``: the entry with its ``request`` (headers, payload)
  and ``response``;
- ``POST /app/hook/deliveries/{id}/attempts``: 202, and the event is queued to be sent
  again with its guid (``world.events``, marked a redelivery, delivered like any event by
  a ``WebhookSender``); 422 for an entry past the window.

A ``WebhookSender`` given the log records each attempt it makes (``post``), and
``lose`` records one that never reached the App (an outage).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from .clock import iso
from .rest import ApiError, not_found
from .routing import Ctx, Reply, RouteTable

if TYPE_CHECKING:
    from .clock import SimClock

routes = RouteTable()

OK = "OK"
TIMED_OUT = "timed out"
NO_CONNECTION = "failed to connect to host"


@dataclass
class Attempt:
    """One entry of the log."""

    id: int
    guid: str
    delivered_at: datetime
    redelivery: bool
    status: str
    status_code: int
    event: str
    action: str | None
    installation_id: int | None
    repository_id: int | None
    headers: dict[str, str]
    payload: dict[str, Any]
    duration: float = 0.05
    response_body: str = ""

    @property
    def ok(self) -> bool:
        return self.status == OK

    def item(self) -> dict[str, Any]:
        return {"id": self.id, "guid": self.guid, "delivered_at": iso(self.delivered_at),
                "redelivery": self.redelivery, "duration": self.duration,
                "status": self.status, "status_code": self.status_code,
                "event": self.event, "action": self.action,
                "installation_id": self.installation_id,
                "repository_id": self.repository_id, "throttled_at": None}

    def full(self) -> dict[str, Any]:
        return {**self.item(), "url": "",
                "request": {"headers": dict(self.headers), "payload": self.payload},
                "response": {"headers": {}, "payload": self.response_body}}


@dataclass
class HookLog:
    """Every delivery attempt, oldest first (``attempts``)."""

    clock: SimClock
    days: int = 3
    #: How old an entry GitHub still redelivers (its ``days``; shorter in a test of the
    #: boundary, where an entry is listed but no longer redelivered).
    redeliver_days: int | None = None
    attempts: list[Attempt] = field(default_factory=list)
    _ids: Any = field(default_factory=lambda: itertools.count(12_077_215_001))

    def record(self, *, guid: str, event: str, headers: dict[str, str],
               payload: dict[str, Any], status: str, status_code: int,
               redelivery: bool = False, at: datetime | None = None) -> Attempt:
        installation = payload.get("installation")
        repository = payload.get("repository")
        action = payload.get("action")
        attempt = Attempt(
            id=next(self._ids), guid=guid, delivered_at=at or self.clock.now(),
            redelivery=redelivery, status=status, status_code=status_code, event=event,
            action=action if isinstance(action, str) else None,
            installation_id=installation.get("id") if isinstance(installation, dict) else None,
            repository_id=repository.get("id") if isinstance(repository, dict) else None,
            headers=dict(headers), payload=payload)
        self.attempts.append(attempt)
        return attempt

    def kept(self) -> list[Attempt]:
        """The entries GitHub still has, newest first."""
        since = self.clock.now() - timedelta(days=self.days)
        return [a for a in reversed(self.attempts) if a.delivered_at >= since]

    def find(self, delivery_id: int) -> Attempt | None:
        return next((a for a in self.kept() if a.id == delivery_id), None)

    def of(self, guid: str) -> list[Attempt]:
        return [a for a in self.attempts if a.guid == guid]


@routes.add("GET", "/app/hook/deliveries", auth="jwt")
async def list_deliveries(ctx: Ctx) -> Reply:
    log: HookLog = ctx.world.hook_log
    entries = log.kept()
    status = ctx.query.get("status")
    if status == "success":
        entries = [a for a in entries if a.ok]
    elif status == "failure":
        entries = [a for a in entries if not a.ok]
    cursor = ctx.query.get("cursor")
    if cursor:
        if not cursor.startswith("v1_") or not cursor[3:].isdigit():
            raise ApiError(400, "Invalid cursor")
        below = int(cursor[3:])
        entries = [a for a in entries if a.id < below]
    try:
        per_page = min(max(int(ctx.query.get("per_page", "30")), 1), 100)
    except ValueError:
        per_page = 30
    chunk = entries[:per_page]
    headers = {}
    if len(entries) > per_page:
        query = {k: v for k, v in ctx.query.items() if k != "cursor"}
        query["cursor"] = f"v1_{chunk[-1].id}"
        headers["link"] = f'<{ctx.base_url}{ctx.path}?{urlencode(query)}>; rel="next"'
    return Reply(body=[a.item() for a in chunk], headers=headers)


def _entry(ctx: Ctx) -> Attempt:
    attempt: Attempt | None = ctx.world.hook_log.find(ctx.int_param("delivery_id"))
    if attempt is None:
        raise not_found()
    return attempt


@routes.add("GET", "/app/hook/deliveries/{delivery_id}", auth="jwt")
async def get_delivery(ctx: Ctx) -> Reply:
    return Reply(body=_entry(ctx).full())


@routes.add("POST", "/app/hook/deliveries/{delivery_id}/attempts", auth="jwt")
async def redeliver(ctx: Ctx) -> Reply:
    attempt, log = _entry(ctx), ctx.world.hook_log
    days = log.days if log.redeliver_days is None else log.redeliver_days
    if attempt.delivered_at < ctx.world.now() - timedelta(days=days):
        raise ApiError(422, "Validation Failed",
                       errors=[{"resource": "HookDelivery", "code": "custom",
                                "message": f"Cannot redeliver deliveries older than {days} "
                                           "days"}])
    ctx.world.redeliver(attempt.event, attempt.payload, attempt.guid)
    return Reply(status=202, body={})
