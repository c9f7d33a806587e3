"""The webhook route answered from uvicorn's HTTP parser, without the ASGI machinery.

For every request uvicorn builds an ASGI scope, a request-response cycle with its event,
an asyncio task, and four messages through two coroutines; for a webhook delivery that
cost about as much CPU as reading, verifying and recording it (docs/PERFORMANCE.md). On
the one route that takes load, ``webhook_protocol`` skips it: uvicorn's httptools
protocol, changed so that a delivery it can take is handed to the receiver's own steps
(``WebhookReceiver.check``, ``submit``, ``settle``/``fail``, ``answer``) from the parser's
callbacks, and its answer written in one ``write``.

It takes a request only when nothing about it needs uvicorn: ``POST`` to the webhook path
(no query string, no percent-escape), HTTP/1.1 with no ``Expect`` and no upgrade, a
declared ``Content-Length`` within the body limit and ``OFF_LOOP_BYTES`` and no
``Transfer-Encoding``, and no other request of the connection in progress (so answers
cannot overtake one another). Every other request -- a large or chunked delivery, one
pipelined behind another, any other route -- goes through uvicorn and the web app as
before, to the same receiver, and is answered the same way.

The stand-in for uvicorn's cycle (``_Delivery``) carries what uvicorn's protocol reads from
``self.cycle``: a lost connection marks it disconnected (the delivery is still recorded
if it was complete, and its answer dropped), a graceful shutdown clears its keep-alive
(the answer then closes the connection, and uvicorn waits for that), and a request
pipelined behind it waits in uvicorn's queue until its answer is written.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from service.webhook.deliveries import Received, Result
from service.webhook.receiver import OFF_LOOP_BYTES, Answer, WebhookReceiver, headers_of

__all__ = ["webhook_protocol"]

_CONTENT_LENGTH: Final = b"content-length"
_TRANSFER_ENCODING: Final = b"transfer-encoding"
_JSON: Final = b"content-type: application/json\r\n"
_CLOSE: Final = b"connection: close\r\n"


class _Event:
    """``set`` for uvicorn's ``connection_lost``: nothing here waits on it."""

    __slots__ = ()

    def set(self) -> None:
        pass


_NO_EVENT: Final = _Event()


class _Delivery:
    """A delivery the fast path took, in uvicorn's ``cycle`` slot until it is answered."""

    __slots__ = ("chunks", "disconnected", "headers", "keep_alive", "message_event",
                 "response_complete", "started")

    def __init__(self, headers: dict[bytes, str], keep_alive: bool) -> None:
        self.started = time.perf_counter()
        self.headers = headers
        self.chunks: list[bytes] = []
        self.keep_alive = keep_alive
        self.disconnected = False
        self.response_complete = False
        self.message_event = _NO_EVENT


def _declared_length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The one ``Content-Length`` of a request without ``Transfer-Encoding``, or None."""
    length = None
    for name, value in headers:
        if name == _TRANSFER_ENCODING or (name == _CONTENT_LENGTH and length is not None):
            return None
        if name == _CONTENT_LENGTH:
            if not value.isdigit():
                return None
            length = int(value)
    return length


def webhook_protocol(receiver: WebhookReceiver, webhook_path: str) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol class, answering ``POST webhook_path`` through
    ``receiver`` directly (``uvicorn.Config(http=...)``)."""
    target = webhook_path.encode("ascii")
    largest = min(receiver.limit, OFF_LOOP_BYTES)

    class WebhookProtocol(HttpToolsProtocol):
        def _takes(self) -> bool:
            parser = self.parser
            if (self.url != target or parser.get_method() != b"POST"
                    or parser.get_http_version() != "1.1" or self.expect_100_continue
                    or parser.should_upgrade() or self.limit_concurrency is not None):
                return False
            if self.cycle is not None and not self.cycle.response_complete:
                return False  # pipelined behind an answer still owed: uvicorn queues it
            length = _declared_length(self.headers)
            return length is not None and length <= largest

        def on_headers_complete(self) -> None:
            if self._takes():
                keep_alive = self.parser.should_keep_alive()
                self.cycle = _Delivery(headers_of(self.headers), keep_alive)  # type: ignore[assignment]
                return
            super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            cycle: Any = self.cycle
            if isinstance(cycle, _Delivery):
                cycle.chunks.append(body)
                return
            super().on_body(body)

        def on_message_complete(self) -> None:
            cycle: Any = self.cycle
            if not isinstance(cycle, _Delivery):
                super().on_message_complete()
                return
            chunks = cycle.chunks
            body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
            cycle.chunks = []
            try:
                checked = receiver.check(cycle.headers, body)
                if isinstance(checked, Received):
                    future = receiver.submit(checked)
            except Exception:
                self._reply(cycle, receiver.bug())
                return
            if not isinstance(checked, Received):
                self._reply(cycle, checked)
                return
            future.add_done_callback(lambda done: self._committed(cycle, checked, done))

        def _committed(self, cycle: _Delivery, received: Received,
                       done: asyncio.Future[Result]) -> None:
            try:
                if done.cancelled():
                    answer: Answer | Result = receiver.fail(
                        received, RuntimeError("the write was cancelled"))
                elif (exc := done.exception()) is not None:
                    answer = receiver.fail(received, exc)
                else:
                    answer = receiver.settle(done.result())
            except Exception:
                answer = receiver.bug()
            self._reply(cycle, answer)

        def _reply(self, cycle: _Delivery, answer: Answer | Result) -> None:
            """Write the answer in one piece, as uvicorn would have written it."""
            status, body, headers = receiver.answer(answer, cycle.started)
            cycle.response_complete = True
            if cycle.disconnected or self.transport.is_closing():
                return
            closes = (b"connection", b"close") in headers  # the answer says so itself
            keep_alive = cycle.keep_alive and not closes
            parts = [STATUS_LINE[status]]
            for name, value in self.server_state.default_headers:
                parts += (name, b": ", value, b"\r\n")
            parts += (b"content-length: ", str(len(body)).encode("ascii"), b"\r\n", _JSON)
            for name, value in headers:
                parts += (name, b": ", value, b"\r\n")
            if not keep_alive and not closes:
                parts.append(_CLOSE)
            parts += (b"\r\n", body)
            self.transport.write(b"".join(parts))
            if not keep_alive:
                self.transport.close()
            self.on_response_complete()

    return WebhookProtocol
