"""What to do about the App's webhook delivery log (pure).

GitHub logs every attempt to deliver an event to the App (``GET /app/hook/deliveries``):
its ``guid`` (the ``X-GitHub-Delivery`` every attempt of one event shares), when, whether
it was a redelivery, and its ``status`` (``"OK"`` for a delivery the App answered 2xx).
GitHub does not send a failed delivery again by itself. Its own procedure is to group the
attempts by guid, leave any guid with an ``OK`` attempt, and ask for the rest again
(docs.github.com, "Automatically redelivering failed deliveries for a GitHub App
webhook"); ``plan`` does that, and more:

- a guid the App recorded (``deliveries``: it answered it, even if GitHub gave up waiting
  and logged a timeout) is never taken again;
- a failed guid is first asked for again (``Redeliver``), while GitHub still redelivers
  it (its window less ``MARGIN``);
- a guid asked for again whose redelivery failed too, or that did not come within
  ``PATIENCE`` (the App's webhook is unreachable from GitHub: a proxy, a firewall), or
  that is too old to redeliver, is fetched from the log and ingested (``Fetch``): the
  entry carries the request's headers and payload.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from service.github.payload import PayloadError, github_time
from service.storage.redeliveries import Requested

__all__ = ["MARGIN", "PATIENCE", "WINDOW", "Logged", "Step", "logged", "plan"]

#: How long GitHub keeps (and redelivers) a delivery: 3 days on github.com (7 on GHES).
WINDOW: Final = timedelta(days=3)
#: A delivery this close to the end of the window is fetched, not asked for again: the
#: request could land after GitHub stopped redelivering it.
MARGIN: Final = timedelta(hours=1)
#: How long a redelivery asked for may take to arrive before it is fetched instead.
PATIENCE: Final = timedelta(minutes=2)


@dataclass(frozen=True)
class Logged:
    """One attempt in GitHub's delivery log."""

    id: int
    guid: str
    delivered_at: datetime
    ok: bool
    event: str
    action: str | None = None
    redelivery: bool = False


def logged(item: Any) -> Logged | None:
    """An entry of the listing, or None for one that is not shaped like GitHub's."""
    if not isinstance(item, Mapping):
        return None
    ident, guid, event = item.get("id"), item.get("guid"), item.get("event")
    try:
        when = github_time(item, "delivered_at", "delivery")
    except PayloadError:
        return None
    if (isinstance(ident, bool) or not isinstance(ident, int) or not isinstance(guid, str)
            or not guid or not isinstance(event, str)):
        return None
    action = item.get("action")
    return Logged(id=ident, guid=guid, delivered_at=when, ok=item.get("status") == "OK",
                  event=event, action=action if isinstance(action, str) else None,
                  redelivery=item.get("redelivery") is True)


@dataclass(frozen=True)
class Step:
    """One thing to do: ask GitHub to send ``guid`` again (the log entry ``delivery_id``),
    or fetch that entry and ingest it here."""

    kind: Literal["redeliver", "fetch"]
    guid: str
    delivery_id: int


def plan(listed: Sequence[Logged], *, taken: Collection[str],
         requested: Mapping[str, Requested], now: datetime,
         window: timedelta = WINDOW) -> tuple[list[Step], set[str]]:
    """The steps for the attempts ``listed`` and the redeliveries ``requested`` before,
    and the guids now settled (an ``OK`` attempt, or recorded here: ``taken``), whose
    ``requested`` rows can go."""
    groups: dict[str, list[Logged]] = {}
    for attempt in listed:
        groups.setdefault(attempt.guid, []).append(attempt)
    steps: list[Step] = []
    settled: set[str] = set()
    for guid in sorted(groups.keys() | requested.keys()):
        attempts = groups.get(guid, [])
        if guid in taken or any(a.ok for a in attempts):
            settled.add(guid)
            continue
        asked = requested.get(guid)
        newest = max(attempts, key=lambda a: (a.delivered_at, a.id), default=None)
        if asked is None:
            if newest is None:  # pragma: no cover - a guid comes from one or the other
                continue
            young = newest.delivered_at > now - window + MARGIN
            steps.append(Step("redeliver" if young else "fetch", guid, newest.id))
            continue
        # An attempt after the entry asked about is GitHub's redelivery (ids only grow),
        # and it failed too: no ``OK`` in the group.
        failed_again = any(a.id > asked.delivery_id for a in attempts)
        if failed_again or now - asked.at >= PATIENCE:
            entry = newest.id if newest is not None else asked.delivery_id
            steps.append(Step("fetch", guid, entry))
    return steps, settled
