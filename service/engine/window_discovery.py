"""Asking an OpenAI-compatible server for its model's context window (the I/O edge of
``windows``): vLLM's ``/v1/models``, llama.cpp's ``/props``, Ollama's ``/api/show``, in
that order, each one short request. The first answer that names a window wins."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx

from service.engine import windows
from service.engine.windows import Window

log = logging.getLogger(__name__)

#: Each question is small and local; a server that does not answer in this long does
#: not hold up a review.
DISCOVERY_TIMEOUT: Final = 5.0
_MAX_BYTES: Final = 1024 * 1024


def server_root(api_url: str) -> str:
    """``http://host:8080/v1`` → ``http://host:8080``: where llama.cpp and Ollama serve
    their own endpoints."""
    root = api_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


async def _json(client: httpx.AsyncClient, method: str, url: str,
                headers: Mapping[str, str], body: Mapping[str, Any] | None = None) -> Any:
    response = await client.request(method, url, headers=headers, json=body)
    if response.status_code != 200 or len(response.content) > _MAX_BYTES:
        return None
    try:
        return response.json()
    except (ValueError, RecursionError):
        return None


async def discover(api_url: str, model: str, *, headers: Mapping[str, str],
                   transport: httpx.AsyncBaseTransport | None = None
                   ) -> tuple[Window | None, bool]:
    """The window the server states for ``model``, and whether the server answered at
    all (when it did not, the caller asks again on a later run)."""
    root = server_root(api_url)
    questions: tuple[tuple[str, str, dict[str, str] | None,
                           Callable[[Any], Window | None]], ...] = (
        ("GET", api_url.rstrip("/") + "/models", None,
         lambda data: windows.from_models_listing(data, model)),
        ("GET", root + "/props", None, windows.from_llama_props),
        ("POST", root + "/api/show", {"model": model}, windows.from_ollama_show),
    )
    answered = False
    async with httpx.AsyncClient(transport=transport, timeout=DISCOVERY_TIMEOUT) as client:
        for method, url, body, read in questions:
            try:
                data = await _json(client, method, url, headers, body)
            except httpx.HTTPError as exc:
                log.info("window discovery: %s %s failed (%s)", method, url,
                         type(exc).__name__)
                continue
            answered = True
            found = read(data)
            if found is not None:
                return found, True
    return None, answered
