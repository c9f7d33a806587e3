"""The in-process way to reach the simulator: an httpx transport around the ASGI app.

    client = httpx.AsyncClient(transport=SimulatorTransport(world),
                               base_url="https://api.github.com")

On top of ``httpx.ASGITransport`` it turns the simulator's connection-drop faults into
the exceptions httpx raises for a real dropped connection (``RemoteProtocolError``,
``ReadError``), and it enforces the request's read timeout (``ASGITransport`` ignores
timeouts), raising ``httpx.ReadTimeout`` when a slow fault outlasts it.
"""

from __future__ import annotations

import anyio
import httpx

from .app import SimulatorApp
from .faults import ConnectionDropped
from .state import World


class SimulatorTransport(httpx.AsyncBaseTransport):
    def __init__(self, world: World, *, prefix: str = "") -> None:
        self.world = world
        self.app = SimulatorApp(world, prefix=prefix)
        self._inner = httpx.ASGITransport(app=self.app)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout") or {}
        read_timeout = timeouts.get("read")
        try:
            if read_timeout is None:
                return await self._inner.handle_async_request(request)
            with anyio.fail_after(read_timeout):
                return await self._inner.handle_async_request(request)
        except ConnectionDropped as dropped:
            if dropped.kind == "read_error":
                raise httpx.ReadError("[Errno 104] Connection reset by peer",
                                      request=request) from None
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.",
                                            request=request) from None
        except TimeoutError:
            raise httpx.ReadTimeout("The read operation timed out", request=request) from None
