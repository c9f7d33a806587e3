"""Build the configured engine: the one place that reads ``EngineConfig`` for engines.

Keys beyond the current ``EngineConfig`` (``credential_env``, ``api_url``,
``api_key_env``, ``max_tokens``, ``response_format``, ``kill_grace_seconds``) are read
with ``getattr`` and a default, so this works before and after config.py grows them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, cast

import httpx

from service.config import EngineConfig
from service.engine.anthropic import DEFAULT_API_URL, AnthropicEngine
from service.engine.base import Engine
from service.engine.claude_code import DEFAULT_CREDENTIAL_ENV, ClaudeCodeEngine
from service.engine.openai_compatible import (
    RESPONSE_FORMATS,
    OpenAICompatibleEngine,
    ResponseFormat,
)

DEFAULT_MAX_TOKENS: Final = 8192
DEFAULT_KILL_GRACE_SECONDS: Final = 5.0


def build_engine(
    config: EngineConfig,
    environ: Mapping[str, str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Engine:
    """The engine ``config.kind`` names, with its secrets read from ``environ``.

    Raises ``ValueError`` with the offending key for a configuration that cannot work
    (an unknown kind, a GitHub variable among the credentials, a missing model or URL).
    """
    kind = config.kind
    max_tokens = _int(config, "max_tokens", DEFAULT_MAX_TOKENS)
    if kind == "claude_code":
        credentials = getattr(config, "credential_env", DEFAULT_CREDENTIAL_ENV)
        if isinstance(credentials, str) or not all(isinstance(n, str) for n in credentials):
            raise ValueError("engine.credential_env must be a list of variable names")
        return ClaudeCodeEngine(
            command=config.command, model=config.model, environ=environ,
            credential_env=tuple(credentials),
            kill_grace_seconds=float(getattr(config, "kill_grace_seconds",
                                             DEFAULT_KILL_GRACE_SECONDS)),
            clock=clock,
        )
    if kind == "anthropic":
        if not config.model:
            raise ValueError("engine.model is required for kind anthropic")
        return AnthropicEngine(
            model=config.model, environ=environ,
            api_key_env=_str(config, "api_key_env") or "ANTHROPIC_API_KEY",
            api_url=_str(config, "api_url") or DEFAULT_API_URL,
            max_tokens=max_tokens, transport=transport, clock=clock,
        )
    if kind == "openai_compatible":
        api_url = _str(config, "api_url")
        if not config.model or not api_url:
            raise ValueError("engine.model and engine.api_url are required for kind "
                             "openai_compatible (e.g. http://localhost:11434/v1)")
        response_format = _str(config, "response_format") or "json_object"
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"engine.response_format must be one of {RESPONSE_FORMATS}")
        return OpenAICompatibleEngine(
            model=config.model, api_url=api_url, environ=environ,
            api_key_env=_str(config, "api_key_env"), max_tokens=max_tokens,
            response_format=cast(ResponseFormat, response_format),
            transport=transport, clock=clock,
        )
    raise ValueError(f"engine.kind must be claude_code, anthropic or openai_compatible, "
                     f"got {kind!r}")


def _str(config: EngineConfig, name: str) -> str | None:
    value: Any = getattr(config, name, None)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"engine.{name} must be a string")
    return value


def _int(config: EngineConfig, name: str, default: int) -> int:
    value: Any = getattr(config, name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"engine.{name} must be a positive integer")
    return value
