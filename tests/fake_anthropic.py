"""A Messages API on loopback that plays a scripted model, for the real Claude Code CLI.

``FakeAnthropic(turns)`` serves ``POST /v1/messages`` (streamed as server-sent events, as
the CLI asks) on 127.0.0.1 and answers the Nth model call with ``turns[N]``:

- ``{"tool": "Read", "input": {...}}`` — a ``tool_use`` block (the model asks for a tool);
- ``{"text": "..."}`` — a text block ending the turn (``"stop_reason"`` and
  ``"output_tokens"`` override the defaults, e.g. ``max_tokens`` for an answer cut off
  at the output maximum);
- ``{"status": 401, "type": "authentication_error", "message": "..."}`` — an error
  answer in the API's shape (``{"type": "error", "error": {...}}``), with
  ``"headers"`` added (``retry-after``…).

Past the script it repeats the last turn. Every request body is kept in ``requests``, and
``tool_results()`` returns what the CLI sent back for each tool call, in order: what the
model would have seen. Other paths (``count_tokens``, anything else) get what a real
server answers for them. The event shapes are the Messages API's streaming format.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeAnthropic:
    """The server and its record (see the module docstring)."""

    def __init__(self, turns: list[dict[str, Any]], *, model: str = "claude-opus-4-8") -> None:
        self.turns = turns
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._calls = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @contextmanager
    def running(self) -> Iterator[FakeAnthropic]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.paths.append(self.path)
                if "count_tokens" in self.path:
                    self._json(200, {"input_tokens": 100})
                    return
                if not self.path.startswith("/v1/messages"):
                    self._json(404, {"type": "error", "error": {
                        "type": "not_found_error", "message": f"no route {self.path}"}})
                    return
                with fake._lock:
                    fake.requests.append(body)
                    turn = fake.turns[min(fake._calls, len(fake.turns) - 1)]
                    fake._calls += 1
                    call = fake._calls
                if "status" in turn:
                    self._json(int(turn["status"]), {"type": "error", "error": {
                        "type": turn.get("type", "api_error"),
                        "message": turn.get("message", "error")}},
                        headers=turn.get("headers", {}))
                    return
                self._stream(turn, call, body.get("model") or fake.model)

            def do_GET(self) -> None:
                fake.paths.append(self.path)
                self._json(404, {"type": "error", "error": {"type": "not_found_error",
                                                            "message": "not found"}})

            def _json(self, status: int, value: object,
                      headers: dict[str, str] | None = None) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                for name, header in (headers or {}).items():
                    self.send_header(name, header)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, turn: dict[str, Any], call: int, model: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                if "tool" in turn:
                    block: dict[str, Any] = {"type": "tool_use", "id": f"toolu_{call:04d}",
                                             "name": turn["tool"], "input": {}}
                    delta = {"type": "input_json_delta",
                             "partial_json": json.dumps(turn.get("input", {}))}
                    stop = "tool_use"
                else:
                    block = {"type": "text", "text": ""}
                    delta = {"type": "text_delta", "text": turn.get("text", "")}
                    stop = turn.get("stop_reason", "end_turn")
                usage = {"input_tokens": 100, "output_tokens": 1,
                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
                for event, data in (
                    ("message_start", {"type": "message_start", "message": {
                        "id": f"msg_{call:04d}", "type": "message", "role": "assistant",
                        "model": model, "content": [], "stop_reason": None,
                        "stop_sequence": None, "usage": usage}}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": block}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": delta}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta",
                                       "delta": {"stop_reason": stop, "stop_sequence": None},
                                       "usage": {"output_tokens": turn.get("output_tokens",
                                                                           20)}}),
                    ("message_stop", {"type": "message_stop"}),
                ):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            thread.join(timeout=5)

    def tool_results(self) -> list[str]:
        """The text of every ``tool_result`` the CLI sent, in the order of the calls."""
        if not self.requests:
            return []
        results: list[str] = []
        for message in self.requests[-1].get("messages", []):
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for part in content:
                if isinstance(part, dict) and part.get("type") == "tool_result":
                    value = part.get("content")
                    if isinstance(value, list):
                        value = "".join(str(p.get("text", "")) for p in value
                                        if isinstance(p, dict))
                    results.append(str(value))
        return results
