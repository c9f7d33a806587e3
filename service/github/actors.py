"""Who a GitHub call is made as: the App itself, or one of its installations.

Shared by the credentials (``auth``), the transport (``requester``) and the client, so
none of them imports another for three names.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Final, Literal

__all__ = ["APP", "Actor", "Clock"]

APP: Final = "app"
"""Pass as the ``actor`` of a client call to authenticate as the App itself (JWT)."""

Actor = int | Literal["app"]
"""An installation id, or ``APP``."""

Clock = Callable[[], datetime]
"""Where the GitHub edge reads the time (the composition root passes the real one)."""
