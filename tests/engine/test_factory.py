"""Building the configured engine: the kind the config names, with its secrets from the
environment; a configuration that cannot work named by its key; and what ``check-config``
warns of before a review would fail."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from service.config.schema import EngineConfig
from service.engine.anthropic import AnthropicEngine
from service.engine.claude_code import ClaudeCodeEngine
from service.engine.factory import build_engine, engine_warnings
from service.engine.openai_compatible import OpenAICompatibleEngine


def test_each_kind_builds_its_engine(tmp_path: Path) -> None:
    assert isinstance(build_engine(EngineConfig(), {}, home_root=tmp_path), ClaudeCodeEngine)
    assert isinstance(build_engine(EngineConfig(kind="anthropic", model="claude-x"),
                                   {"ANTHROPIC_API_KEY": "k"}), AnthropicEngine)
    assert isinstance(build_engine(EngineConfig(kind="openai_compatible", model="qwen",
                                                api_url="http://127.0.0.1:11434/v1"), {}),
                      OpenAICompatibleEngine)


@pytest.mark.parametrize(("config", "why"), [
    (EngineConfig(kind="anthropic"), "engine.model is required for kind anthropic"),
    (EngineConfig(kind="openai_compatible", model="qwen"),
     "engine.model and engine.api_url are required for kind openai_compatible"),
    (EngineConfig(kind="openai_compatible", model="qwen", api_url="http://x/v1",
                  response_format="xml"), "engine.response_format must be one of"),
    (EngineConfig(kind="gpt"), "engine.kind must be claude_code, anthropic or "
                               "openai_compatible, got 'gpt'"),
])
def test_a_configuration_that_cannot_work_is_named_by_its_key(config: EngineConfig,
                                                              why: str) -> None:
    with pytest.raises(ValueError, match=why):
        build_engine(config, {})


def test_check_config_warns_of_a_missing_command_and_unset_credentials(tmp_path: Path) -> None:
    claude = tmp_path / "bin" / "claude"
    claude.parent.mkdir()
    claude.write_text("#!/bin/sh\n")
    claude.chmod(0o755)
    config = replace(EngineConfig(), command="claude -p", credential_env=("A_TOKEN", "B_KEY"))
    path = {"PATH": str(claude.parent)}
    assert engine_warnings(config, {**path, "A_TOKEN": "x"}) == []  # one is enough
    [unset] = engine_warnings(config, path)
    assert unset.startswith("engine.credential_env: A_TOKEN, B_KEY are not set")
    [missing] = engine_warnings(config, {"PATH": str(tmp_path), "A_TOKEN": "x"})
    assert missing.startswith("engine.command: 'claude' is not on PATH")
    anthropic = EngineConfig(kind="anthropic", model="m")
    assert engine_warnings(anthropic, {"ANTHROPIC_API_KEY": "k"}) == []
    assert engine_warnings(anthropic, {}) == [
        "engine.api_key_env: ANTHROPIC_API_KEY is not set"]
