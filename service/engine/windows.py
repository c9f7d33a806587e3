"""A model's context window: configured, read from the server, or from a table. Pure.

Every call must satisfy prompt + ``max_tokens`` ≤ the window: OpenAI, vLLM and
llama.cpp check the sum and answer 400 when it is over, however short the answer would
have been. So each engine knows its model's window, from the first of:

1. ``engine.context_tokens`` (the operator's word wins);
2. the server, where it says (``openai_compatible`` only; ``discovery`` asks):
   vLLM's ``/v1/models`` entry (``max_model_len``; LiteLLM and others use
   ``context_length`` / ``context_window``), llama.cpp's ``/props`` (``n_ctx`` of the
   slots it serves), Ollama's ``/api/show`` (the model's ``num_ctx`` parameter, else
   Ollama's smallest default of 4,096: Ollama silently cuts a longer prompt);
3. ``MODEL_WINDOWS``, for Anthropic's and OpenAI's models by name;
4. unknown: calls are then sized by the run's reservation alone, and a server's
   "context length" refusal is reported as such (docs/ENGINE.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

#: Context windows by model-name prefix, longest prefix first when several match. The
#: figures are the vendors' published ones (docs/ENGINE.md#the-models-window lists them);
#: Anthropic's 1M-token window needs a beta header this App does not send.
MODEL_WINDOWS: Final[Mapping[str, int]] = {
    "claude-": 200_000,
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1-mini": 128_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
}
#: Claude Code with no model configured uses a Claude model: its window.
CLAUDE_DEFAULT_WINDOW: Final = 200_000
#: Ollama's context when the model sets no ``num_ctx`` (it picks 4K, 32K or 256K by the
#: GPU's memory, which the API does not say): the smallest, so nothing is cut.
OLLAMA_DEFAULT_CTX: Final = 4_096
#: A window smaller than this is not believed (a misread field).
MIN_WINDOW: Final = 1_024

_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Window:
    """The model's context window in tokens (None: unknown) and where it came from."""

    tokens: int | None
    source: str

    def describe(self) -> str:
        if self.tokens is None:
            return ("unknown (set engine.context_tokens, or the server does not say): calls "
                    "are sized by the run's reservation alone")
        return f"{self.tokens:,} tokens ({self.source})"


UNKNOWN: Final = Window(None, "unknown")


def configured(tokens: int) -> Window | None:
    """``engine.context_tokens``; 0 means "find it out"."""
    return Window(tokens, "engine.context_tokens") if tokens > 0 else None


def from_table(model: str | None) -> Window | None:
    """The published window of a model named in ``MODEL_WINDOWS`` (a provider prefix such
    as ``openai/`` or ``anthropic/`` is ignored), or None."""
    if not model:
        return None
    name = model.rsplit("/", 1)[-1].lower()
    matches = [p for p in MODEL_WINDOWS if name.startswith(p)]
    if not matches:
        return None
    return Window(MODEL_WINDOWS[max(matches, key=len)], "the published window of this model")


def _size(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= MIN_WINDOW:
        return value
    return None


def from_models_listing(data: Any, model: str) -> Window | None:
    """``GET /v1/models``: the entry whose ``id`` is ``model``, when it names its window."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("id") != model:
            continue
        for name in ("max_model_len", "context_length", "context_window", "max_input_tokens"):
            size = _size(entry.get(name))
            if size is not None:
                return Window(size, f"the server's /v1/models ({name})")
    return None


def from_llama_props(data: Any) -> Window | None:
    """llama.cpp's ``GET /props``: the context of the slots that serve requests."""
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    for value in (settings.get("n_ctx") if isinstance(settings, dict) else None,
                  data.get("n_ctx")):
        size = _size(value)
        if size is not None:
            return Window(size, "the server's /props (n_ctx)")
    return None


def from_ollama_show(data: Any) -> Window | None:
    """Ollama's ``POST /api/show``: the model's ``num_ctx`` parameter, else Ollama's
    smallest default. None when the answer is not Ollama's."""
    if not isinstance(data, dict) or not any(k in data for k in ("model_info", "details",
                                                                "modelfile")):
        return None
    parameters = data.get("parameters")
    match = _NUM_CTX.search(parameters) if isinstance(parameters, str) else None
    if match is not None and _size(int(match.group(1))) is not None:
        return Window(int(match.group(1)), "Ollama's /api/show (num_ctx)")
    return Window(OLLAMA_DEFAULT_CTX, "Ollama's default context (the model sets no num_ctx)")


def stated_in_error(message: str) -> int | None:
    """The window a context-length refusal states ("maximum context length is 16385
    tokens", "context size (8192)"), for the log and the run's detail; None if none."""
    match = re.search(r"(?:context length|context window|context size|n_ctx)\D{0,40}?"
                      r"(\d[\d,]{3,})", message, re.IGNORECASE)
    if match is None:
        return None
    return _size(int(match.group(1).replace(",", "")))
