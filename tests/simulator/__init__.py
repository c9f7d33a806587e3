"""A GitHub simulator for tests and local development (see README.md in this folder).

In-process: build a ``World``, reach it through ``SimulatorTransport(world)``, inspect
and steer it through the same object. Standalone: ``python -m tests.simulator --port 0
--state state.json``.
"""

from __future__ import annotations

from .app import SimulatorApp
from .clock import SimClock
from .events import EmittedEvent, WebhookPayloads
from .faults import Fault, FaultSchedule
from .git import GitRepo, open_pull, push_to_pull
from .records import RecordedRequest, RequestLog
from .seed import load_world, world_from_json
from .settings import Settings
from .state import World
from .transport import SimulatorTransport
from .webhooks import WebhookSender, sign

__all__ = [
    "EmittedEvent",
    "Fault",
    "FaultSchedule",
    "GitRepo",
    "RecordedRequest",
    "RequestLog",
    "Settings",
    "SimClock",
    "SimulatorApp",
    "SimulatorTransport",
    "WebhookPayloads",
    "WebhookSender",
    "World",
    "load_world",
    "open_pull",
    "push_to_pull",
    "sign",
    "world_from_json",
]
