"""deploy/ and the Dockerfile promise what the docs say: ports, volume, probes, reload.

Docker cannot run on the machine the tests run on, so the files are parsed and checked
against each other and against the service (the config each one starts with must load,
or be the one registration completes).
"""

from __future__ import annotations

import configparser
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from service.cli.main import build_parser
from service.config.connections import ServerConfig
from service.config.validate import parse_config

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
DATA = "/var/lib/pr-review-agent"
PORT = ServerConfig().port


def k8s() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((DEPLOY / "kubernetes" / "pr-review-agent.yaml").read_text()))
    return {d["kind"]: d for d in docs}


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((DEPLOY / "pr-review-agent.service").read_text())
    return parser


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text()


def json_array(instruction: str) -> list[str]:
    """The exec-form argument list of a Dockerfile instruction (ENTRYPOINT, CMD)."""
    found = re.search(rf"^{instruction} (\[.*\])$", dockerfile(), re.MULTILINE)
    assert found, instruction
    return yaml.safe_load(found[1])  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("secrets")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (d / "app.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (d / "hook").write_text("hook-secret")
    return d


def test_the_kubernetes_config_loads(secrets: Path) -> None:
    config = yaml.safe_load(k8s()["ConfigMap"]["data"]["config.yaml"])
    mounts = {m["name"]: m["mountPath"]
              for m in k8s()["Deployment"]["spec"]["template"]["spec"]["containers"][0][
                  "volumeMounts"]}
    # The key files are where the Secret is mounted, under the names the Secret has.
    items = {Path(config["github"][k]).name for k in ("private_key_file", "webhook_secret_file")}
    assert items == {"github-app.pem", "github-webhook-secret"}
    assert {str(Path(config["github"][k]).parent)
            for k in ("private_key_file", "webhook_secret_file")} == {mounts["github"]}
    assert config["store"]["path"].startswith(mounts["data"] + "/")
    config["github"]["private_key_file"] = str(secrets / "app.pem")
    config["github"]["webhook_secret_file"] = str(secrets / "hook")
    parsed = parse_config(config, {}, secrets)
    assert parsed.server.port == PORT


def test_compose_has_port_volume_restart_healthcheck_and_a_public_url() -> None:
    svc = compose()["services"]["pr-review-agent"]
    assert f"{PORT}:{PORT}" in svc["ports"]
    assert f"agent-data:{DATA}" in svc["volumes"]
    assert "agent-data" in compose()["volumes"]
    assert svc["restart"] in ("unless-stopped", "always", "on-failure")
    test = svc["healthcheck"]["test"]
    assert test[0] == "CMD"
    checked = build_parser().parse_args(test[2:])
    assert test[1] == "pr-review-agent" and checked.command == "healthcheck"
    assert checked.config == f"{DATA}/config.yaml"
    assert svc["stop_signal"] == "SIGTERM"
    # The config (and what registration writes beside it) is on the volume, and the
    # command parses as `serve` with a public URL the operator must give.
    command = svc["command"]
    args = build_parser().parse_args(command)
    assert args.command == "serve" and args.config == f"{DATA}/config.yaml"
    assert re.fullmatch(r"\$\{PUBLIC_URL:\?[^}]+\}", args.public_url)
    # Hardened: read-only root, writable volume and /tmp only, no capabilities.
    assert svc["read_only"] is True and svc["tmpfs"] == ["/tmp"]
    assert svc["cap_drop"] == ["ALL"]
    # The engine's credential only; nothing GitHub's.
    assert set(svc["environment"]) == {"CLAUDE_CODE_OAUTH_TOKEN"}
    assert svc["build"]["args"]["CLAUDE_CODE_VERSION"].startswith("${CLAUDE_CODE_VERSION:-2.")


def test_systemd_unit_is_hardened_and_reloads_with_sighup() -> None:
    service = unit()["Service"]
    assert service["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert service["Restart"] == "on-failure"
    assert service["KillMode"] == "mixed"  # the engine is not killed under a running review
    assert service["User"] == "pr-review-agent"
    assert service["ProtectSystem"] == "strict"
    assert service["NoNewPrivileges"] == "yes"
    assert service["StateDirectory"] == "pr-review-agent"
    assert service["StateDirectoryMode"] == "0700"
    assert service["UMask"] == "0077"
    # The config is in the state directory, the one place the hardening leaves writable,
    # so the first start can write it and registration can complete it.
    executable, *argv = service["ExecStart"].split()
    assert executable.endswith("/pr-review-agent")
    args = build_parser().parse_args(argv)
    assert args.command == "serve" and args.config == f"/var/lib/{service['StateDirectory']}" \
                                                      "/config.yaml"
    assert service["WorkingDirectory"] == DATA


def test_kubernetes_runs_one_replica_with_a_volume_probes_and_a_secret() -> None:
    docs = k8s()
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 1
    assert deployment["strategy"]["type"] == "Recreate"
    pod = deployment["template"]["spec"]
    container = pod["containers"][0]
    assert container["ports"][0]["containerPort"] == PORT
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
        assert container[probe]["httpGet"]["port"] == container["ports"][0]["name"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["data"] == DATA
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == (
        docs["PersistentVolumeClaim"]["metadata"]["name"])
    assert volumes["github"]["secret"]["secretName"] == "pr-review-agent-github"
    assert volumes["github"]["secret"]["defaultMode"] == 0o400
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's user
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    args = build_parser().parse_args(container["args"])
    assert args.command == "serve" and args.config == f"{mounts['config']}/config.yaml"
    assert docs["Service"]["spec"]["ports"][0]["targetPort"] == "http"


def test_dockerfile_is_pinned_non_root_with_git_a_volume_and_a_healthcheck() -> None:
    text = dockerfile()
    assert re.search(r"ARG PYTHON_IMAGE=python:3\.\d+\.\d+-slim", text)
    assert "ARG CLAUDE_CODE_VERSION" in text
    assert "--require-hashes" in text and "requirements.lock" in text
    assert re.search(r"apt-get install[^\n]* git", text)
    assert re.search(r"^USER agent$", text, re.MULTILINE)
    assert re.search(r"useradd [^\n]*--uid 10001", text)
    assert f'VOLUME ["{DATA}"]' in text
    assert re.search(r"^HEALTHCHECK ", text, re.MULTILINE)
    assert f"EXPOSE {PORT}" in text
    # Nothing is fetched unpinned: no `pip install .` (its build backend would be).
    assert not re.search(r"pip install[^\n]* \.$", text, re.MULTILINE)
    # Node.js stays in the build stage: only the CLI's binary reaches the image.
    final = text[text.rindex("\nFROM "):]
    assert "nodejs" not in final and "COPY --from=claude-code /out/ /usr/local/bin/" in final
    lock = (ROOT / "requirements.lock").read_text()
    for package in ("fastapi", "uvicorn", "httpx", "pyjwt", "cryptography", "pyyaml"):
        assert re.search(rf"^{package}==\S+ \\$", lock, re.MULTILINE), package
    # Every pinned distribution carries at least one hash (pip refuses the lock otherwise).
    blocks = re.split(r"^(?=[a-z0-9_.-]+==)", lock, flags=re.MULTILINE)[1:]
    assert len(blocks) >= 20
    for block in blocks:
        assert "--hash=sha256:" in block, block.split()[0]

def test_the_image_starts_serve_on_the_volume() -> None:
    entrypoint, command = json_array("ENTRYPOINT"), json_array("CMD")
    assert entrypoint == ["pr-review-agent"]
    args = build_parser().parse_args(command)
    assert args.command == "serve" and args.config == f"{DATA}/config.yaml"
    # The entrypoint is the real CLI, run from source.
    assert re.search(r"exec python -m service \"\$@\"", dockerfile())
    assert "PYTHONPATH=/opt/pr-review-agent" in dockerfile()
    assert "COPY service ./service" in dockerfile()


def test_no_deployment_keeps_a_secret_where_the_engine_may_read() -> None:
    # The engine's sandbox opens system trees; the deploy files put the config, the App's
    # secrets, the engine's token file and the store elsewhere (docs/SECURITY.md).
    from service.engine.sandbox import Sandbox, tree_holding

    data = Path(DATA)
    policy = Sandbox().policy(roots=("/usr/local",),
                              worktree=data / "checkouts" / "worktrees" / "1-abc",
                              home=data / "engine-homes" / "pr-review-engine-1-abc")
    trees = [*policy["read"], *policy["write"]]
    mounts = {m["name"]: m["mountPath"]
              for m in k8s()["Deployment"]["spec"]["template"]["spec"]["containers"][0][
                  "volumeMounts"]}
    for path in (data / "config.yaml", data / "secrets" / "app.pem", data / "state.db",
                 data, Path(mounts["config"]) / "config.yaml",
                 Path(mounts["github"]) / "private-key.pem", Path("/etc/pr-review-agent.env")):
        assert tree_holding(str(path), trees) is None, path


def k8s_postgres() -> dict[str, dict[str, Any]]:
    docs = yaml.safe_load_all(
        (DEPLOY / "kubernetes" / "pr-review-agent-postgres.yaml").read_text())
    return {d["kind"]: d for d in docs}


def test_kubernetes_on_postgresql_rolls_three_replicas_with_a_disruption_budget() -> None:
    docs = k8s_postgres()
    deployment = docs["Deployment"]["spec"]
    assert deployment["replicas"] == 3
    assert deployment["strategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    labels = deployment["template"]["metadata"]["labels"]
    pdb = docs["PodDisruptionBudget"]["spec"]
    assert pdb["selector"]["matchLabels"] == labels == deployment["selector"]["matchLabels"]
    assert 1 <= pdb["minAvailable"] < deployment["replicas"]
    pod = deployment["template"]["spec"]
    container = pod["containers"][0]
    # Ready on /healthz (a replica whose database is down leaves the Service); alive on the
    # socket (restarting every pod would not bring a database back).
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["livenessProbe"]["tcpSocket"]["port"] == container["ports"][0]["name"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "serve" and args.role == "all"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "persistentVolumeClaim" not in volumes["data"]  # nothing durable on the pod
    assert volumes["postgres"]["secret"]["defaultMode"] == 0o400
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert docs["Service"]["spec"]["selector"] == labels


def test_the_kubernetes_postgresql_config_loads_with_its_password_from_the_secret(
        secrets: Path) -> None:
    docs = k8s_postgres()
    config = yaml.safe_load(docs["ConfigMap"]["data"]["config.yaml"])
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert str(Path(config["store"]["password_file"]).parent) == mounts["postgres"]
    assert config["store"]["path"].startswith(mounts["data"] + "/")  # the checkout cache
    (secrets / "pg").write_text("pw")
    config["github"]["private_key_file"] = str(secrets / "app.pem")
    config["github"]["webhook_secret_file"] = str(secrets / "hook")
    config["store"]["password_file"] = str(secrets / "pg")
    parsed = parse_config(config, {}, secrets)
    assert parsed.store.url is not None and parsed.store.url.startswith("postgresql://")
    assert parsed.store.password is not None and parsed.store.password.reveal() == "pw"


def test_compose_has_a_postgres_profile_that_leaves_the_default_alone() -> None:
    document = compose()
    agent, postgres = document["services"]["pr-review-agent"], document["services"]["postgres"]
    assert "profiles" not in agent  # `docker compose up` is still the one SQLite host
    assert postgres["profiles"] == ["postgres"]
    assert postgres["image"].startswith("postgres:15")
    assert "pg_isready" in postgres["healthcheck"]["test"]
    assert "ports" not in postgres  # reached by the agent on the network only
    # Its password is a file (a secret), never a value in the file or the environment.
    assert postgres["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres-password"
    assert "POSTGRES_PASSWORD" not in postgres["environment"]
    assert document["secrets"]["postgres-password"]["file"] == "./postgres-password"
    assert "deploy/postgres-password" in (ROOT / ".gitignore").read_text().splitlines()
    assert any(v.startswith("postgres-data:") for v in postgres["volumes"])


def _ci_claude_version() -> str:
    found = re.search(r"^CLAUDE_CODE_VERSION=(\S+)$", (ROOT / ".ci" / "run").read_text(),
                      re.MULTILINE)
    assert found
    return found[1]


def test_a_plain_build_includes_the_engine_ci_tests_against() -> None:
    pinned = _ci_claude_version()
    assert re.search(rf"^ARG CLAUDE_CODE_VERSION={re.escape(pinned)}$", dockerfile(),
                     re.MULTILINE)
    build = compose()["services"]["pr-review-agent"]["build"]["args"]
    assert build["CLAUDE_CODE_VERSION"] == f"${{CLAUDE_CODE_VERSION:-{pinned}}}"


def test_the_healthcheck_follows_server_port() -> None:
    found = re.search(r"^HEALTHCHECK [^\n]*\\\n\s+CMD (\[.*\])$", dockerfile(), re.MULTILINE)
    assert found, "HEALTHCHECK ... CMD [exec form]"
    argv = yaml.safe_load(found[1])
    assert argv[0] == "pr-review-agent"
    args = build_parser().parse_args(argv[1:])
    assert args.command == "healthcheck" and args.config == f"{DATA}/config.yaml"
    assert "8080" not in found[0]  # the port comes from the config, not the image


def test_compose_refuses_to_start_without_the_engines_credential() -> None:
    env = compose()["services"]["pr-review-agent"]["environment"]
    assert re.fullmatch(r"\$\{CLAUDE_CODE_OAUTH_TOKEN:\?[^}]+\}", env["CLAUDE_CODE_OAUTH_TOKEN"])


def _locked() -> dict[str, str]:
    """requirements.lock's pins, by normalised name."""
    text = (ROOT / "requirements.lock").read_text()
    return {canonicalize_name(name): version for name, version in re.findall(
        r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", text, re.MULTILINE)}


def test_the_lock_pins_every_runtime_dependency_within_its_declared_range() -> None:
    """What pyproject.toml declares and what requirements.lock ships agree: every
    dependency is pinned, at a version its declared range admits."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    locked = _locked()
    for line in project["dependencies"]:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in locked, (
            f"{name} is a dependency but requirements.lock does not pin it: regenerate it "
            "(its header says how)")
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"requirements.lock pins {name}=={locked[name]}, outside pyproject.toml's "
            f"{requirement.specifier}")


def test_the_versions_under_test_are_the_locked_ones() -> None:
    """Tested = shipped: every distribution the lock pins is installed here at exactly
    that version (the README's commands install the lock first), so the suite runs what
    the image installs. An upgrade is one deliberate change to the lock."""
    from importlib.metadata import PackageNotFoundError, version

    differ = {}
    for name, pinned in _locked().items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            if (name, sys.platform) == ("uvloop", "win32"):
                continue
            installed = "not installed"
        if installed != pinned:
            differ[name] = f"{installed} installed, {pinned} locked"
    assert differ == {}, differ


@pytest.mark.parametrize("manifest", ["pr-review-agent.yaml", "pr-review-agent-postgres.yaml"])
def test_kubernetes_names_a_registry_requires_the_credential_and_has_an_ingress(
        manifest: str) -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all(
        (DEPLOY / "kubernetes" / manifest).read_text())}
    container = docs["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    image = container["image"]
    registry, _, rest = image.partition("/")
    assert "." in registry and rest.endswith(":0.1.0"), image  # a registry host, a tag
    [engine] = [e for e in container["env"] if e["name"] == "CLAUDE_CODE_OAUTH_TOKEN"]
    assert engine["valueFrom"]["secretKeyRef"].get("optional", False) is False
    ingress = docs["Ingress"]["spec"]
    [rule] = ingress["rules"]
    [path] = rule["http"]["paths"]
    backend = path["backend"]["service"]
    assert backend["name"] == docs["Service"]["metadata"]["name"]
    assert backend["port"]["name"] == docs["Service"]["spec"]["ports"][0]["name"]
    assert ingress["tls"][0]["hosts"] == [rule["host"]]


def test_the_build_context_lets_through_what_the_image_copies_and_nothing_else() -> None:
    """``.dockerignore`` is an allowlist: the Dockerfile's COPY sources, and no secret,
    store, config or virtual environment of a checkout."""
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"  # everything is left out unless let through below
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    sources = {source.rstrip("/") for found in re.findall(
        r"^COPY (?!--from)(.+) \S+$", dockerfile(), re.MULTILINE) for source in found.split()}
    assert sources and sources <= allowed, (sources, allowed)
    assert allowed == {"requirements.lock", "service"}


@pytest.mark.parametrize("path", [
    "config.yaml", "secrets/github-app-1.pem", "dev/secrets/github-app-1.pem",
    "dev/config.yaml", "deploy/secrets/webhook", "elsewhere/secrets/key",
    "state.db", "dev/state.db", "deploy/postgres-password", "deploy/.env", "app.pem",
])
def test_git_never_offers_a_secret_or_a_store_for_commit(path: str) -> None:
    import subprocess
    ignored = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT,
                             check=False)
    assert ignored.returncode == 0, f"{path} is not ignored by .gitignore"


def test_compose_copies_into_postgresql_with_its_password_file() -> None:
    text = (DEPLOY / "docker-compose.yml").read_text()
    found = re.search(r"migrate \\\n#\s+--from (\S+) \\\n#\s+--to (\S+) \\\n#\s+"
                      r"--password-file (\S+)", text)
    assert found, "the compose file's migrate step gives --password-file"
    args = build_parser().parse_args(["migrate", "--from", found[1], "--to", found[2],
                                      "--password-file", found[3]])
    assert args.password_file == f"{DATA}/secrets/postgres-password"


def test_the_docs_count_the_locked_distributions_the_lock_has() -> None:
    pinned = re.findall(r"^[a-z0-9][a-z0-9._-]*==", (ROOT / "requirements.lock").read_text(),
                        re.MULTILINE | re.IGNORECASE)
    said = re.search(r"the (\d+) locked Python distributions",
                     (ROOT / "docs" / "ONBOARDING.md").read_text())
    assert said is not None and int(said[1]) == len(pinned)


def test_the_operations_examples_show_this_codes_schema_version() -> None:
    from service.storage.sqlite import HEAD_VERSION
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    shown = {int(n) for n in re.findall(r'"schema_version": (\d+)', text)}
    shown |= {int(n) for n in re.findall(r"at schema version (\d+) \(this code's\)", text)}
    assert shown == {HEAD_VERSION}


def test_the_unit_gives_room_for_every_connection_and_serve_raises_its_soft_limit() -> None:
    import resource

    from service.app.serving import raise_file_limit
    from service.config.connections import ServerConfig

    limit = int(unit()["Service"]["LimitNOFILE"])
    assert limit >= ServerConfig().max_connections + 1000
    soft, hard = raise_file_limit()
    assert soft == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    for manifest in ("pr-review-agent.yaml", "pr-review-agent-postgres.yaml"):
        assert "RLIMIT_NOFILE" in (DEPLOY / "kubernetes" / manifest).read_text()
