"""The budget's second-layer keys: per_actor_pct, max_reviews_per_pr, monthly_usd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.config.describe import describe_config
from service.config.errors import ConfigError
from service.config.schema import BudgetConfig
from service.config.validate import parse_config


@pytest.fixture(scope="module")
def key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


@pytest.fixture
def base(tmp_path: Path, key_pem: str) -> Path:
    (tmp_path / "app.pem").write_text(key_pem)
    (tmp_path / "webhook").write_text("whsec-budget-config")
    return tmp_path


def doc(**budget: object) -> dict[str, Any]:
    return {
        "github": {"app_id": 1, "private_key_file": "app.pem", "webhook_secret_file": "webhook"},
        "triggers": {},
        "budget": {"session_tokens": 88_000, "weekly_tokens": 1_500_000,
                   "max_run_tokens": 30_000, **budget},
    }


def problems(base: Path, **budget: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(doc(**budget), {}, base)
    return caught.value.problems


def test_defaults_leave_the_second_layer_off_except_the_pacer(base: Path) -> None:
    budget = parse_config(doc(), {}, base).budget
    assert (budget.per_actor_pct, budget.max_reviews_per_pr, budget.monthly_usd) == (100, 5, None)


def test_every_key_is_read(base: Path) -> None:
    budget = parse_config(doc(per_actor_pct=90, max_reviews_per_pr=2, monthly_usd=40),
                          {}, base).budget
    assert budget == BudgetConfig(enabled=True, session_tokens=88_000, weekly_tokens=1_500_000,
                                  max_run_tokens=30_000, reviewer_share_pct=40, per_actor_pct=90,
                                  max_reviews_per_pr=2, monthly_usd=40.0)
    assert isinstance(budget.monthly_usd, float)  # an integer in YAML is still dollars
    assert parse_config(doc(monthly_usd=None), {}, base).budget.monthly_usd is None


@pytest.mark.parametrize(("key", "value", "message"), [
    ("per_actor_pct", 0, "budget.per_actor_pct: must be between 1 and 100, got 0"),
    ("per_actor_pct", 101, "budget.per_actor_pct: must be between 1 and 100, got 101"),
    ("per_actor_pct", True, "budget.per_actor_pct: must be an integer, got true"),
    ("max_reviews_per_pr", 0, "budget.max_reviews_per_pr: must be at least 1, got 0"),
    ("max_reviews_per_pr", 2.0, "budget.max_reviews_per_pr: must be an integer, got 2.0"),
    ("monthly_usd", 0, "budget.monthly_usd: must be a number of dollars greater than 0, got 0"),
    ("monthly_usd", -5.5,
     "budget.monthly_usd: must be a number of dollars greater than 0, got -5.5"),
    ("monthly_usd", float("inf"),
     "budget.monthly_usd: must be a number of dollars greater than 0, got inf"),
    ("monthly_usd", True, "budget.monthly_usd: must be a number of dollars, got true"),
    ("monthly_usd", "50", 'budget.monthly_usd: must be a number of dollars, got "50"'),
])
def test_bad_values_are_refused_with_their_key(base: Path, key: str, value: object,
                                               message: str) -> None:
    assert problems(base, **{key: value}) == [message]


def test_a_per_person_cap_below_one_run_is_refused(base: Path) -> None:
    # 40 % of 88 000 is a 35 200 session allowance; 50 % of it is 17 600 < 30 000.
    assert problems(base, per_actor_pct=50) == [
        "budget.per_actor_pct: 50% of the session allowance is 17600 tokens, less than "
        "max_run_tokens 30000; no one's run could ever be admitted"]
    assert parse_config(doc(per_actor_pct=86), {}, base).budget.per_actor_pct == 86


def test_a_monthly_cap_below_one_run_is_refused(base: Path) -> None:
    # 30 000 tokens at $15 per million is $0.45.
    assert problems(base, monthly_usd=0.44) == [
        "budget.monthly_usd: $0.44 cannot pay for one run of max_run_tokens 30000 at the "
        "starting estimate of $15 per million tokens ($0.45)"]
    assert parse_config(doc(monthly_usd=0.45), {}, base).budget.monthly_usd == 0.45


def test_a_misspelt_key_is_suggested(base: Path) -> None:
    assert problems(base, per_actor_percent=50) == [
        "budget.per_actor_percent: unknown key (did you mean per_actor_pct?)"]


def test_describe_shows_the_second_layer(base: Path) -> None:
    off = describe_config(parse_config(doc(), {}, base))
    assert "budget per-person cap: off (per_actor_pct 100)" in off
    assert "budget pacer: at most 5 run(s) per pull request per 24 h" in off
    assert "budget monthly dollars: no cap (monthly_usd not set)" in off
    on = describe_config(parse_config(doc(per_actor_pct=90, max_reviews_per_pr=3,
                                          monthly_usd=25), {}, base))
    assert ("budget per-person cap: 90% of each window "
            "(session 31680, daily 77142, weekly 540000 tokens)") in on
    assert "budget pacer: at most 3 run(s) per pull request per 24 h" in on
    assert "budget monthly dollars: $25.00 per trailing 30 days" in on
