"""Build the configured engine: the one place that reads ``EngineConfig`` for engines.

The config has already checked each key's type and bounds; what is checked here is what
only makes sense per kind (a model and a URL the kind needs).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import cast

import httpx

from service.config.schema import Config, EngineConfig, Isolation
from service.engine.anthropic import DEFAULT_API_URL, AnthropicEngine
from service.engine.base import Engine
from service.engine.claude_code import ClaudeCodeEngine
from service.engine.openai_compatible import (
    RESPONSE_FORMATS,
    OpenAICompatibleEngine,
    ResponseFormat,
)
from service.engine.sandbox import Sandbox, Verified, verify


def build_engine(
    config: EngineConfig,
    environ: Mapping[str, str],
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], datetime] | None = None,
    home_root: Path | None = None,
) -> Engine:
    """The engine ``config.kind`` names, with its secrets read from ``environ``.

    ``home_root`` holds the claude_code engine's throwaway HOMEs (default: the system's
    temporary directory).

    Raises ``ValueError`` with the offending key for a configuration that cannot work
    (an unknown kind, a GitHub variable among the credentials, a missing model or URL).
    """
    kind = config.kind
    if kind == "claude_code":
        return ClaudeCodeEngine(
            command=config.command, model=config.model, environ=environ,
            credential_env=config.credential_env,
            kill_grace_seconds=float(config.kill_grace_seconds),
            sandbox=Sandbox(isolation=cast(Isolation, config.isolation),
                            read_paths=config.isolation_read_paths,
                            write_paths=config.isolation_write_paths, home_root=home_root),
            clock=clock, context_tokens=config.context_tokens,
        )
    if kind == "anthropic":
        if not config.model:
            raise ValueError("engine.model is required for kind anthropic")
        return AnthropicEngine(
            model=config.model, environ=environ,
            api_key_env=config.api_key_env or "ANTHROPIC_API_KEY",
            api_url=config.api_url or DEFAULT_API_URL,
            max_tokens=config.max_tokens, transport=transport, clock=clock,
            context_tokens=config.context_tokens,
        )
    if kind == "openai_compatible":
        api_url = config.api_url
        if not config.model or not api_url:
            raise ValueError("engine.model and engine.api_url are required for kind "
                             "openai_compatible (e.g. http://localhost:11434/v1)")
        response_format = config.response_format
        if response_format not in RESPONSE_FORMATS:
            raise ValueError(f"engine.response_format must be one of {RESPONSE_FORMATS}")
        return OpenAICompatibleEngine(
            model=config.model, api_url=api_url, environ=environ,
            api_key_env=config.api_key_env, max_tokens=config.max_tokens,
            response_format=cast(ResponseFormat, response_format),
            transport=transport, clock=clock, context_tokens=config.context_tokens,
        )
    raise ValueError(f"engine.kind must be claude_code, anthropic or openai_compatible, "
                     f"got {kind!r}")




def engine_homes(config: Config) -> Path:
    """Where the claude_code engine's throwaway HOMEs go: beside the store."""
    return Path(config.store.path).parent / "engine-homes"


def protected_paths(config: Config, config_path: str | os.PathLike[str] | None,
                    environ: Mapping[str, str]) -> list[Path]:
    """What an engine must never be able to open: the config file, every secret file,
    the store and its directory (the git cache lives there too), and the CLI's own
    credentials and settings in the service user's HOME."""
    gh, server = config.github, config.server
    secrets = [gh.private_key, *gh.webhook_secrets, server.admin_token]
    paths = [Path(s.source) for s in secrets if s is not None and s.source is not None]
    if config_path is not None:
        paths.append(Path(config_path))
    store = Path(config.store.path)
    paths += [store, store.parent]
    home = environ.get("HOME")
    if home:
        paths += [Path(home) / ".claude", Path(home) / ".claude.json"]
    return paths


def verify_engine(engine: Engine, config: Config, config_path: str | os.PathLike[str] | None,
                  environ: Mapping[str, str]) -> Verified | None:
    """Prove, on this kernel, that ``engine``'s runs cannot open a protected path.

    None for the HTTP engines, which run no child. Raises ``SandboxError`` (the caller
    refuses to start the engine) when the sandbox cannot be built or leaks.
    """
    if not isinstance(engine, ClaudeCodeEngine):
        return None
    return verify(engine.sandbox, roots=engine.install_roots(),
                  protected=protected_paths(config, config_path, environ),
                  service_pid=os.getpid())


def engine_warnings(config: EngineConfig, environ: Mapping[str, str]) -> list[str]:
    """What would make every review end ``engine_unavailable`` here, for ``check-config``:
    a command not on PATH, a credential variable that is not set."""
    warnings: list[str] = []
    if config.kind == "claude_code":
        words = shlex.split(config.command)
        if words and shutil.which(words[0], path=environ.get("PATH")) is None:
            warnings.append(f"engine.command: {words[0]!r} is not on PATH or not executable; "
                            "every review would end engine_unavailable")
        unset = [n for n in config.credential_env if not environ.get(n)]
        if unset and len(unset) == len(config.credential_env):
            warnings.append(f"engine.credential_env: {', '.join(unset)} "
                            f"{'is' if len(unset) == 1 else 'are'} not set; claude would not "
                            "be logged in (give the token from `claude setup-token`)")
    else:
        name = config.api_key_env or ("ANTHROPIC_API_KEY" if config.kind == "anthropic" else None)
        if name is not None and not environ.get(name):
            warnings.append(f"engine.api_key_env: {name} is not set")
    return warnings
