"""What one process's components share: the production clock, an installation change
logged and rung to whoever answers it, and the redactor every write to GitHub goes
through — cleaned of the App's secrets and the engine's credentials by name."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from service.app.services import Services, service_redactor, utc_now
from service.config.connections import GitHubConfig, ServerConfig
from service.config.schema import BudgetConfig, Config, EngineConfig, TriggersConfig
from service.config.secret import Secret
from service.intake.webhook.installations import InstallationChange
from service.runtime.nap import Bell

# Test values, each longer than the redactor's minimum (a shorter one would match words).
HOOK, OLD_HOOK, ADMIN = "hook-now-5f1c2a", "hook-was-77e0b1", "admin-tok-3d9e40"
OAUTH, ANTHROPIC_KEY, LOCAL_KEY = "oauth-value-8c2f11", "sk-ant-one-4e7d", "sk-local-two-9a3c"
CONFIG = Config(
    github=GitHubConfig(app_id=1, private_key=Secret("PEM-BODY"),
                        webhook_secrets=(Secret(HOOK), Secret(OLD_HOOK))),
    server=ServerConfig(admin_token=Secret(ADMIN)), triggers=TriggersConfig(),
    budget=BudgetConfig(session_tokens=100_000, weekly_tokens=1_000_000,
                        max_run_tokens=10_000))


def test_the_clock_is_aware_utc() -> None:
    offset = utc_now().utcoffset()
    assert offset is not None and offset.total_seconds() == 0


def test_an_installation_change_is_rung_to_whoever_answers() -> None:
    heard: list[Any] = []
    bell = Bell("installations")
    bell.answer(heard.append)
    change = InstallationChange(installation_id=31, action="added", added=("acme/new",))
    Services.installation_changed(SimpleNamespace(installations=bell), change)  # type: ignore[arg-type]
    assert heard == [change]


def test_what_goes_to_github_is_cleaned_of_every_secret_the_process_holds() -> None:
    redactor = service_redactor(CONFIG, {"CLAUDE_CODE_OAUTH_TOKEN": OAUTH,
                                         "UNRELATED": "keep-me-please"})
    out = redactor.redact(f"{HOOK} {OLD_HOOK} {ADMIN} {OAUTH} keep-me-please").text
    for secret in (HOOK, OLD_HOOK, ADMIN, OAUTH):
        assert secret not in out
    assert "keep-me-please" in out


def test_an_http_engines_key_is_cleaned_whether_named_or_defaulted() -> None:
    anthropic = replace(CONFIG, engine=EngineConfig(kind="anthropic", model="m"))
    redactor = service_redactor(anthropic, {"ANTHROPIC_API_KEY": ANTHROPIC_KEY})
    assert ANTHROPIC_KEY not in redactor.redact(f"key {ANTHROPIC_KEY}").text
    named = replace(CONFIG, engine=EngineConfig(kind="openai_compatible", model="m",
                                                api_url="http://x/v1", api_key_env="MY_KEY"))
    redactor = service_redactor(named, {"MY_KEY": LOCAL_KEY})
    assert LOCAL_KEY not in redactor.redact(LOCAL_KEY).text
