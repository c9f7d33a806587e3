"""A config that cannot be used says every problem at once; the App not being registered
yet is told apart by a flag, with the rest of the file parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config.errors import ConfigError, MissingCredentials
from service.config.strict_yaml import load_config


def test_every_problem_is_kept_and_shown_one_a_line() -> None:
    error = ConfigError(["github.app_id: required", "budget: required section is missing"])
    assert error.problems == ["github.app_id: required", "budget: required section is missing"]
    assert str(error) == "github.app_id: required\nbudget: required section is missing"
    assert not error.registration_needed


def test_an_unregistered_app_is_the_one_error_that_carries_the_config(tmp_path: Path) -> None:
    text = ("triggers: {}\nbudget: {session_tokens: 88000, weekly_tokens: 1500000, "
            "max_run_tokens: 30000}\n")
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(MissingCredentials) as raised:
        load_config(path, {})
    assert raised.value.registration_needed
    assert isinstance(raised.value, ConfigError)
    assert raised.value.config.budget.session_tokens == 88000
    assert raised.value.config.github.app_id == 0  # the placeholder registration fills in
