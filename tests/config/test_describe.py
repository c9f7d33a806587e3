"""What check-config says a config means: the derived limits, a disabled budget, a secret
rotation — and never a secret."""

from __future__ import annotations

from pathlib import Path

from service.config.describe import describe_config
from service.config.validate import parse_config
from tests.config_documents import (
    ADMIN_TOKEN,
    PREVIOUS_SECRET,
    WEBHOOK_SECRET,
    full,
    minimal,
    rsa_pem,
    secrets_dir,
)

__all__ = ["rsa_pem", "secrets_dir"]  # fixtures


def test_describe_shows_the_derived_limits(secrets_dir: Path) -> None:
    lines = describe_config(parse_config(minimal(), {}, secrets_dir))
    assert "github: app 123456 at https://api.github.com" in lines
    assert f"store: SQLite file {secrets_dir / 'state.db'}" in lines
    assert "budget: enabled; reviewer share 40%" in lines
    assert "budget window session (5 h): 35200 tokens (40% of session_tokens 88000)" in lines
    assert "budget window daily (24 h): 85714 tokens (40% of weekly_tokens 1500000, ÷ 7)" in lines
    assert "budget window weekly (7 d): 600000 tokens (40% of weekly_tokens 1500000)" in lines
    assert "budget max_run_tokens: 30000 reserved per run" in lines
    assert "triggers: mention @claude; auto review on; on push off" in lines
    assert not any("by size" in line for line in lines)
    data = minimal()
    data["engine"] = {"models": [{"model": "haiku", "max_prompt_tokens": 8000},
                                 {"model": "wide"}]}
    engine_line = next(line for line in describe_config(parse_config(data, {}, secrets_dir))
                       if line.startswith("engine:"))
    assert engine_line.endswith("; by size: haiku up to 8000 tokens, wide past the default's "
                                "window")


def test_describe_a_disabled_budget_and_rotation(secrets_dir: Path) -> None:
    (secrets_dir / "webhook.old").write_text(PREVIOUS_SECRET)
    (secrets_dir / "admin").write_text(ADMIN_TOKEN)
    lines = describe_config(parse_config(full(), {}, secrets_dir))
    assert "budget: DISABLED — a hard stop, nothing is admitted; reviewer share 25%" in lines
    assert "budget window session (5 h): 25000 tokens (25% of session_tokens 100000)" in lines
    assert "budget window daily (24 h): 71428 tokens (25% of weekly_tokens 2000000, ÷ 7)" in lines
    assert "GET /budget: needs the admin token" in lines
    assert "repositories: acme/widgets, acme/gadgets.js" in lines
    assert any("(plus one previous, during a rotation)" in line for line in lines)
    text = "\n".join(lines)
    for secret in (WEBHOOK_SECRET, PREVIOUS_SECRET, ADMIN_TOKEN):
        assert secret not in text
