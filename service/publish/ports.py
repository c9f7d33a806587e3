"""What a job says to the outside world: the 👀 acknowledgement and the publication.

The pool only knows the ``Publisher`` protocol. ``ack`` runs first thing in a job (a
failure is logged, never fatal); ``publish`` runs after the run is recorded and its cost
settled, outside any transaction, so a failed post is retried from the ``runs`` row
without a second review. The 👀 itself is ``acknowledge.py``'s.
"""

from __future__ import annotations

from typing import Protocol

from service.publish.run import RecordedRun
from service.storage.queue import Claim


class Acknowledger(Protocol):
    async def ack(self, claim: Claim) -> None:
        """Tell the person (or the pull request) that the work has started."""
        ...


class Publisher(Acknowledger, Protocol):
    async def publish(self, run: RecordedRun) -> None:
        """Post a recorded run. Called after the record is committed, never inside it."""
        ...
