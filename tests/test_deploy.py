"""deploy/ and the Dockerfile promise what the docs say: ports, volume, probes, reload."""

from __future__ import annotations

import configparser
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.config import parse_config

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def k8s() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "pr-review-agent.yaml").read_text()))
    return {d["kind"]: d for d in docs}


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((DEPLOY / "pr-review-agent.service").read_text())
    return parser


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("secrets")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (d / "app.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (d / "hook").write_text("hook-secret")
    return d


def loads(config: dict[str, Any], secrets: Path) -> None:
    """The example config is valid for the real loader, secrets aside."""
    config["github"]["private_key_file"] = str(secrets / "app.pem")
    config["github"]["webhook_secret_file"] = str(secrets / "hook")
    parsed = parse_config(config, {}, secrets)
    assert parsed.server.port == 8080


def test_the_example_configs_load(secrets: Path) -> None:
    loads(yaml.safe_load((DEPLOY / "config.yaml").read_text()), secrets)
    loads(yaml.safe_load(k8s()["ConfigMap"]["data"]["config.yaml"]), secrets)


def test_compose_has_port_volume_secrets_restart_and_healthcheck() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    svc = compose["services"]["pr-review-agent"]
    assert "8080:8080" in svc["ports"]
    assert any(v.startswith("agent-data:/var/lib/pr-review-agent") for v in svc["volumes"])
    assert svc["restart"] in ("unless-stopped", "always", "on-failure")
    assert set(svc["secrets"]) == {"github-app.pem", "github-webhook-secret"}
    assert "/healthz" in " ".join(svc["healthcheck"]["test"])
    assert "agent-data" in compose["volumes"]


def test_systemd_unit_is_hardened_and_reloads_with_sighup() -> None:
    service = unit()["Service"]
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["Restart"] == "on-failure"
    assert service["KillMode"] == "mixed"  # the engine is not killed under a running review
    assert service["User"] == "pr-review-agent"
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "yes"
    assert service["StateDirectory"] == "pr-review-agent"
    assert "serve --config" in service["ExecStart"]


def test_kubernetes_runs_one_replica_with_a_volume_probes_and_a_secret() -> None:
    docs = k8s()
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"]["type"] == "Recreate"
    pod = deployment["template"]["spec"]
    container = pod["containers"][0]
    assert container["ports"][0]["containerPort"] == 8080
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["data"] == "/var/lib/pr-review-agent"
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == (
        docs["PersistentVolumeClaim"]["metadata"]["name"])
    assert volumes["github"]["secret"]["secretName"] == "pr-review-agent-github"
    assert pod["securityContext"]["runAsNonRoot"] is True


def test_dockerfile_is_pinned_non_root_with_git_a_volume_and_a_healthcheck() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"ARG PYTHON_IMAGE=python:3\.\d+\.\d+-slim", text)
    assert "ARG CLAUDE_CODE_VERSION" in text
    assert "--require-hashes" in text and "requirements.lock" in text
    assert re.search(r"apt-get install[^\n]* git", text)
    assert re.search(r"^USER agent$", text, re.MULTILINE)
    assert 'VOLUME ["/var/lib/pr-review-agent"]' in text
    assert re.search(r"^HEALTHCHECK .*\n?.*/healthz", text, re.MULTILINE)
    assert "EXPOSE 8080" in text
    lock = (ROOT / "requirements.lock").read_text()
    for package in ("fastapi", "uvicorn", "httpx", "pyjwt", "cryptography", "pyyaml"):
        assert re.search(rf"^{package}==\S+ \\$", lock, re.MULTILINE), package
    assert lock.count("--hash=sha256:") >= 20
