"""``pr-review-agent budget``: the numbers of GET /budget, and the two operator actions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.budget.breaker import read_breaker
from service.budget.governor import Governor
from service.budget.policy import read_policy
from service.budget.usage import Usage
from service.cli.main import main
from service.config.strict_yaml import load_config
from service.storage.sqlite import SqliteStore
from tests.kit.queue import QueueDriver
from tests.queue_helpers import mention


@pytest.fixture(scope="module")
def key_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def write(path: Path, **budget: object) -> None:
    path.write_text(yaml.safe_dump({
        "github": {"app_id": 1, "private_key_file": "app.pem", "webhook_secret_file": "hook"},
        "store": {"path": "state.db"},
        "triggers": {},
        "budget": {"session_tokens": 100_000, "weekly_tokens": 1_400_000,
                   "max_run_tokens": 10_000, "reviewer_share_pct": 50, **budget},
    }))


@pytest.fixture
def config_file(tmp_path: Path, key_pem: str) -> Path:
    (tmp_path / "app.pem").write_text(key_pem)
    (tmp_path / "hook").write_text("whsec-cli-budget")
    path = tmp_path / "config.yaml"
    write(path, monthly_usd=20)
    return path


def spend(config_file: Path, *, tokens: int, cost: float | None, trip: bool = False) -> None:
    """A run through a real governor, as the service would have left it, a minute ago."""
    config = load_config(config_file, {})
    now = datetime.now(UTC) - timedelta(minutes=1)
    with SqliteStore(config.store.path) as store:
        queue, gov = QueueDriver(store), Governor(store, config.budget, authority="daemon")
        queue.enqueue(mention(1, 1), now=now)
        c = queue.claim(now=now, owner="w", admit=gov.admit)
        assert c is not None
        gov.settle(c, Usage(tokens, "exact", "claude_code", None, cost_usd=cost), now=now,
                   stop_reason="usage_limit" if trip else "completed")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_is_the_get_budget_body(config_file: Path, capsys: pytest.CaptureFixture[str]
                                     ) -> None:
    spend(config_file, tokens=4_000, cost=0.75)
    code, out, _ = run(capsys, "budget", "--config", str(config_file), "--json")
    assert code == 0
    body = json.loads(out)
    config = load_config(config_file, {})
    with SqliteStore(config.store.path) as store:
        expected = Governor(store, config.budget, publish=False).snapshot(
            datetime.fromisoformat(body["now"])).as_json()
    assert body == json.loads(json.dumps(expected))
    assert body["windows"][0]["spent"] == 4_000 and body["windows"][0]["spent_usd"] == 0.75
    assert body["monthly"]["limit_usd"] == 20.0


def test_the_table_shows_the_same_numbers(config_file: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    spend(config_file, tokens=4_000, cost=0.75)
    code, out, _ = run(capsys, "budget", "--config", str(config_file))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("budget at ") and "mode full (enabled)" in lines[0]
    assert ("per-person cap off; per-installation cap off; pacer 5 run(s) per pull request"
            " per 24 h") in lines[1]
    assert lines[2].startswith("breaker: closed; limits at 100%")
    assert lines[3].startswith("policy: published by daemon at ")
    header = lines[4].split()
    assert header[:3] == ["window", "limit", "configured"]
    session = lines[5].split()
    # 50 % of 100 000; 4 000 spent; none reserved; 46 000 left; 8.0 %; $0.75.
    assert session[:8] == ["session", "50000", "50000", "4000", "0", "46000", "8.0%", "$0.75"]
    assert any(line.startswith("monthly dollars (30 days): limit $20.00; spent $0.75")
               for line in lines)


def test_looking_does_not_publish_a_policy(config_file: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "budget", "--config", str(config_file))
    assert code == 0 and "policy: none published yet" in out
    with SqliteStore(load_config(config_file, {}).store.path) as store, store.read() as conn:
        assert read_policy(conn) is None


def test_reset_calibration_closes_the_breaker(config_file: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    spend(config_file, tokens=0, cost=None, trip=True)
    code, out, _ = run(capsys, "budget", "--config", str(config_file))
    assert "breaker: TRIPPED until" in out and "mode exhausted" in out
    code, out, err = run(capsys, "budget", "--config", str(config_file),
                         "--reset-calibration", "--json")
    assert code == 0 and "calibration reset" in err
    assert json.loads(out)["breaker"]["tripped"] is False
    with SqliteStore(load_config(config_file, {}).store.path) as store, store.read() as conn:
        assert read_breaker(conn).last_trip_at is None


def test_publish_policy_replaces_the_row(config_file: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    spend(config_file, tokens=1_000, cost=None)  # the daemon published 100 000
    write(config_file, session_tokens=60_000)
    code, out, _ = run(capsys, "budget", "--config", str(config_file), "--json")
    body = json.loads(out)
    assert body["policy"]["overrides_local"] is True
    assert body["windows"][0]["limit"] == 50_000  # the row's, not this file's
    code, out, err = run(capsys, "budget", "--config", str(config_file), "--publish-policy",
                         "--json")
    assert code == 0 and "shared policy replaced" in err
    body = json.loads(out)
    assert body["policy"]["overrides_local"] is False
    assert body["windows"][0]["limit"] == 30_000


def test_a_broken_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("budget: {}\n")
    code, _, err = run(capsys, "budget", "--config", str(path))
    assert code == 2 and "problem(s)" in err
    assert not (tmp_path / "state.db").exists()
