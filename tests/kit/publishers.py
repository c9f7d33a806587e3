"""A publisher that keeps what it is handed: the workers' tests read what a job published."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from service.publish.ports import Acknowledger
from service.publish.run import RecordedRun
from service.storage.queue import Claim


class RecordingPublisher:
    """Keeps every ack and run it is handed; ``on_publish`` sees each run as it comes."""

    def __init__(self, acker: Acknowledger | None = None,
                 on_publish: Callable[[RecordedRun], Awaitable[None]] | None = None) -> None:
        self._acker = acker
        self._on_publish = on_publish
        self.acks: list[Claim] = []
        self.runs: list[RecordedRun] = []

    async def ack(self, claim: Claim) -> None:
        self.acks.append(claim)
        if self._acker is not None:
            await self._acker.ack(claim)

    async def publish(self, run: RecordedRun) -> None:
        self.runs.append(run)
        if self._on_publish is not None:
            await self._on_publish(run)
