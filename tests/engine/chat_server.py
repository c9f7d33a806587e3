"""What an OpenAI-compatible server that states no context window answers to the
engine's window questions (``window_discovery``): 404, as vLLM, llama.cpp and Ollama do
for a path they do not serve. Tests of the chat calls wrap their handler in it."""

from __future__ import annotations

from collections.abc import Callable

import httpx

DISCOVERY_PATHS = ("/v1/models", "/props", "/api/show")


def chat_only(handler: Callable[[httpx.Request], httpx.Response]
              ) -> Callable[[httpx.Request], httpx.Response]:
    """``handler`` for the chat calls; 404 for the window questions (never recorded)."""
    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith(DISCOVERY_PATHS):
            return httpx.Response(404, json={"error": {"message": "Not Found"}})
        return handler(request)
    return serve
