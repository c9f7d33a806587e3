"""Bounds on what an unauthenticated client can hold of the web server.

The webhook URL must be public, and nothing a client sends is trusted until its signature
verifies, which needs the whole body. uvicorn itself sets no limit on header bytes, no
deadline for a request's headers or body, and no cap on connections; so a few clients
could hold the process's memory (a 25 MiB body declared and never finished, megabytes of
headers) and its file descriptors (connections opened and left idle). The guard bounds
them, in front of uvicorn's own HTTP protocol:

- **header bytes**: a request whose headers grow past ``max_header_bytes`` is answered
  431 and its connection closed; its bytes are not passed on. The count is taken per
  read, so at most one read (256 KiB) more than the limit is ever held;
- **a deadline for the headers** (``header_timeout_seconds`` from a request's first byte)
  and **one for the body** (``body_timeout_seconds`` from the end of its headers): a
  client past either is disconnected (slowloris);
- **idle connections**: one that sends nothing for ``idle_timeout_seconds`` after it
  opens is closed; after a response, uvicorn's keep-alive timeout closes it;
- **connections**: past ``max_connections`` open at once, a new one is answered 503 and
  closed at once.

The body bytes buffered across requests are bounded by the route itself
(``service.intake.webhook.receiver``, ``max_buffered_body_bytes``).

How it sits in front of uvicorn, with public interfaces only: uvicorn's ``http`` option
takes an ``asyncio.Protocol`` class, and the guard is one. It builds uvicorn's own
httptools protocol (the class uvicorn's ``Config(http="httptools")`` names) with the
arguments uvicorn gives it and hands it the connection and every byte it lets through,
through the ``asyncio.Protocol`` interface and nothing else. It follows each request's
framing with its own ``httptools.HttpRequestParser``: the same parser, fed the same bytes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

import httptools

__all__ = ["GuardLimits", "guarded_protocol"]

log = logging.getLogger(__name__)

_REFUSED_431 = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: "
                b"application/json\r\nconnection: close\r\ncontent-length: 46\r\n\r\n"
                b'{"error": "request header fields too large"}\r\n')
_REFUSED_503 = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                b"retry-after: 5\r\nconnection: close\r\ncontent-length: 33\r\n\r\n"
                b'{"error": "too many connections"}')


@dataclass(frozen=True)
class GuardLimits:
    """The bounds (``server.*`` keys of the same names)."""

    max_header_bytes: int
    header_timeout_seconds: float
    body_timeout_seconds: float
    idle_timeout_seconds: float
    max_connections: int


class _Open:
    """Connections open now, across every guarded protocol of one server."""

    def __init__(self) -> None:
        self.count = 0


def guarded_protocol(inner: type[asyncio.Protocol], limits: GuardLimits
                     ) -> type[asyncio.Protocol]:
    """An ``asyncio.Protocol`` class for uvicorn's ``http`` option: ``inner`` (uvicorn's
    own protocol class) behind the bounds in ``limits``."""
    open_now = _Open()

    class Guarded(asyncio.Protocol):
        def __init__(self, **kwargs: Any) -> None:
            self._inner = inner(**kwargs)
            self._transport: asyncio.Transport | None = None
            self._counted = False
            self._parser = httptools.HttpRequestParser(self)
            self._in_head = False      # a request has begun and its headers are not done
            self._in_body = False      # its headers are done and its body is not
            self._head_bytes = 0
            self._timer: asyncio.TimerHandle | None = None
            self._framing_lost = False  # the parser gave up: uvicorn's answers the request

        # -- the connection -------------------------------------------------------------

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            # (uvloop's transports implement asyncio's interface without subclassing it)
            self._transport = cast(asyncio.Transport, transport)
            if open_now.count >= limits.max_connections:
                log.warning("connection refused: %d connections open",
                            open_now.count, extra={"limit": limits.max_connections})
                self._transport.write(_REFUSED_503)
                self._transport.close()
                return
            open_now.count += 1
            self._counted = True
            self._inner.connection_made(transport)
            self._arm(limits.idle_timeout_seconds, "idle")

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._counted:
                self._counted = False
                open_now.count -= 1
                self._inner.connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if not self._counted:
                return
            if not self._framing_lost:
                try:
                    self._parser.feed_data(data)
                except httptools.HttpParserUpgrade:
                    self._framing_lost = True
                except httptools.HttpParserError:
                    # Not HTTP this parser can follow: uvicorn's own parser answers it (400)
                    # and ends the connection; nothing more is followed here.
                    self._framing_lost = True
                    self._disarm()
                if self._in_head:
                    self._head_bytes += len(data)
                    if self._head_bytes > limits.max_header_bytes:
                        self._refuse_head()
                        return
            self._inner.data_received(data)

        def eof_received(self) -> bool | None:
            return self._inner.eof_received() if self._counted else None

        def pause_writing(self) -> None:
            self._inner.pause_writing()

        def resume_writing(self) -> None:
            self._inner.resume_writing()

        # -- the parser's callbacks (httptools calls them by name) ------------------------

        def on_message_begin(self) -> None:
            self._in_head, self._head_bytes = True, 0
            self._arm(limits.header_timeout_seconds, "headers")

        def on_headers_complete(self) -> None:
            self._in_head, self._in_body = False, True
            self._arm(limits.body_timeout_seconds, "body")

        def on_message_complete(self) -> None:
            self._in_body = False
            self._disarm()  # the response is uvicorn's; then its keep-alive timeout runs

        # -- the bounds -------------------------------------------------------------------

        def _refuse_head(self) -> None:
            log.warning("request refused: headers over the limit",
                        extra={"limit_bytes": limits.max_header_bytes})
            self._disarm()
            self._counted_close(_REFUSED_431)

        def _arm(self, seconds: float, what: str) -> None:
            self._disarm()
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(seconds, self._expired, what, seconds)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _expired(self, what: str, seconds: float) -> None:
            self._timer = None
            log.info("connection closed: no %s within %g s", what, seconds,
                     extra={"deadline": what})
            self._counted_close(None)

        def _counted_close(self, answer: bytes | None) -> None:
            transport = self._transport
            if transport is None or transport.is_closing():
                return
            if answer is not None:
                transport.write(answer)
            transport.close()

    return Guarded
