"""What ``check-config`` says of a file waiting for registration: the one step left, how to
take it, and what the rest of the file means."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.app.setup.run import describe_pending
from service.config.errors import MissingCredentials
from service.config.strict_yaml import load_config

CONFIG = """\
server: {host: 127.0.0.1, port: 8080}
triggers: {}
budget: {session_tokens: 88000, weekly_tokens: 1500000, max_run_tokens: 30000}
"""


def test_a_file_waiting_for_registration_says_the_one_step_left(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    with pytest.raises(MissingCredentials) as pending:
        load_config(path, {})
    lines = describe_pending(str(path), pending.value)
    assert lines[0] == f"{path}: registration is the one step left"
    assert f"  Register it: pr-review-agent serve --config {path} --public-url URL" in lines
    assert "  github: not registered yet (API https://api.github.com)" in lines
    assert any(line.startswith("  budget window session (5 h): 35200 tokens") for line in lines)
