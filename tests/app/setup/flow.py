"""The registration flow the setup tests drive: a config without the App's credentials, a
``Registrar`` talking to the simulator as GitHub, and the setup page served in process
(the ``flow`` fixture)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.app.setup.page import create_setup_app
from service.app.setup.registrar import Registered, Registrar
from service.config.errors import MissingCredentials
from service.config.strict_yaml import load_config
from tests.simulator import SimulatorTransport, World

__all__ = ["CONFIG", "KEY", "Clock", "Flow", "flow", "pending_of"]

KEY = "console-key-for-tests"
CONFIG = """\
# The operator's own words, which registration must keep.
server:
  host: 127.0.0.1
  port: 8080       # behind the proxy
  public_url: https://reviews.example.com
triggers: {}
budget:
  session_tokens: 88000   # my estimate
  weekly_tokens: 1500000
  max_run_tokens: 30000
"""



class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Flow:
    world: World
    registrar: Registrar
    client: httpx.AsyncClient
    config_path: Path
    clock: Clock
    announced: list[Registered] = field(default_factory=list)

    async def start(self, form: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
        """POST the form; the GitHub URL the page posts to, and the manifest it carries."""
        response = await self.client.post("/setup/register",
                                          data={"key": KEY, "owner": "user", **(form or {})})
        assert response.status_code == 200, response.text
        action = unescape(re.search(r"<form id=manifest method=post action='([^']+)'",
                                    response.text)[1])  # type: ignore[index]
        manifest = unescape(re.search(r"name=manifest value='([^']+)'",
                                      response.text)[1])  # type: ignore[index]
        return action, json.loads(manifest)

    def github_creates(self, manifest: dict[str, Any]) -> str:
        """What GitHub does when the person clicks "Create GitHub App": a one-time code."""
        return self.world.create_manifest_code(manifest)


def pending_of(path: Path) -> MissingCredentials:
    with pytest.raises(MissingCredentials) as caught:
        load_config(path, {})
    return caught.value


@pytest.fixture
async def flow(tmp_path: Path) -> AsyncIterator[Flow]:
    world = World()
    config_path = tmp_path / "etc" / "config.yaml"
    config_path.parent.mkdir()
    config_path.write_text(CONFIG)
    clock = Clock()
    registrar = Registrar(config_path, pending_of(config_path).config,
                          public_url="https://reviews.example.com", environ={}, clock=clock,
                          transport=SimulatorTransport(world))
    announced: list[Registered] = []
    app = create_setup_app(registrar, setup_key=KEY, webhook_path="/webhook",
                           on_registered=announced.append)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="https://reviews.example.com") as client:
        yield Flow(world, registrar, client, config_path, clock, announced)
