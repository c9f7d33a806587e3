"""One webhook delivery: as received (raw body), as parsed, and what became of it (the
``Result`` the route answers with and the outcome recorded in ``deliveries``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from service.github.payload import PayloadError
from service.github.webhooks import parse_body
from service.intake.ingest import Applied
from service.intake.rules.decisions import Close, Decision, Decline
from service.intake.webhook.installations import InstallationChange

_MAX_SQL_INT: Final = 2**63 - 1


def safe_text(value: object, limit: int = 200) -> str | None:
    """A string fit for a column, a log line or a JSON answer: valid UTF-8, cut to ``limit``."""
    if not isinstance(value, str):
        return None
    return value[:limit].encode("utf-8", "replace").decode("utf-8")


def sql_id(value: object) -> int | None:
    """A positive id that fits a SQLite INTEGER, or None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= _MAX_SQL_INT:
        return None
    return value


@dataclass(frozen=True)
class Received:
    """A delivery whose signature verified, and when; its body not yet parsed.

    ``received_at`` is the instant the receiver accepted it: what ``deliveries`` records
    and what the queue rows it asks for are enqueued at.
    """

    delivery_id: str
    event: str
    body: bytes
    content_type: str | None
    received_at: datetime

    def parse(self) -> Delivery:
        """The parsed delivery (``PayloadError`` if the body is not a payload)."""
        try:
            payload = parse_body(self.body, self.content_type)
        except RecursionError:  # a structure nested past what any reader can walk
            raise PayloadError("the payload is nested too deeply") from None
        return Delivery(self.delivery_id, self.event, payload, self.received_at)


@dataclass(frozen=True)
class Delivery:
    """One verified, parsed webhook delivery."""

    delivery_id: str
    event: str
    payload: Mapping[str, Any]
    received_at: datetime

    @functools.cached_property
    def action(self) -> str | None:
        return safe_text(self.payload.get("action"), 100)

    @functools.cached_property
    def comment_id(self) -> int | None:
        """The id of the comment a comment event is about (None for other events)."""
        comment = self.payload.get("comment")
        return sql_id(comment.get("id")) if isinstance(comment, Mapping) else None

    @functools.cached_property
    def installation_id(self) -> int | None:
        inst = self.payload.get("installation")
        return sql_id(inst.get("id")) if isinstance(inst, Mapping) else None

    def log_fields(self) -> dict[str, object]:
        """``delivery_id``, ``event``, ``action``, ``repo``, ``pr``, ``installation_id``."""
        p = self.payload
        repo = p.get("repository")
        numbers = [p.get("number")] + [
            obj.get("number") for obj in (p.get("pull_request"), p.get("issue"))
            if isinstance(obj, Mapping)
        ]
        return {
            "delivery_id": self.delivery_id, "event": self.event, "action": self.action,
            "repo": safe_text(repo.get("full_name")) if isinstance(repo, Mapping) else None,
            "pr": next((n for n in numbers if sql_id(n) is not None), None),
            "installation_id": self.installation_id,
        }


@dataclass(frozen=True)
class Result:
    """What one delivery did: the HTTP answer and the ``deliveries.outcome`` recorded."""

    status: int
    outcome: str
    delivery_id: str
    enqueued: list[str] = field(default_factory=list)
    ignored: str | None = None
    change: InstallationChange | None = None
    error: str | None = None  # a 400: the body was not a payload (nothing recorded)

    def body(self) -> dict[str, object]:
        if self.error is not None:
            return {"error": self.error}
        if self.outcome == "duplicate":
            return {"duplicate": True}
        if self.outcome == "ping":
            return {"delivery": self.delivery_id, "ping": True}
        return {"delivery": self.delivery_id, "enqueued": self.enqueued, "ignored": self.ignored}


def outcome_of(delivery_id: str, decision: Decision, applied: Applied) -> Result:
    """What a trigger delivery did: its answer's lists and its recorded outcome."""
    ignored = safe_text(applied.ignored)
    if applied.enqueued:
        outcome = "enqueued"
    elif applied.duplicates:
        outcome = "already_queued"
    elif isinstance(decision, Close):
        outcome = f"closed:cancelled={len(applied.cancelled)}"
    elif isinstance(decision, Decline):
        # 0 when the reply answers no open finding of the App's (another thread, or one
        # already settled): nothing moved.
        outcome = f"declined:findings={len(applied.declined)}"
    else:
        outcome = f"ignored:{ignored}"
    return Result(202, outcome, delivery_id, enqueued=applied.enqueued + applied.duplicates,
                  ignored=ignored)
