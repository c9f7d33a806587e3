"""``/healthz`` of a real ``serve`` as GitHub and the store change under it."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

from service.storage.sqlite import HEAD_VERSION
from tests.e2e.conftest import E2E
from tests.e2e.harness import INSTALLATION_ID
from tests.kit.waiting import wait_for


def test_healthz_reports_token_mints_and_a_store_at_another_version(e2e: E2E) -> None:
    # GitHub refuses every installation token (a suspended installation, a revoked key…),
    # while the App JWT still works: GET /app at start succeeds, every mint after fails.
    mints = {"method": "POST", "path_glob": "/app/installations/*/access_tokens",
             "status": 403, "body": {"message": "This installation has been suspended"}}
    assert e2e.sim.client.post("/_simulator/faults", json=mints).status_code == 201
    serve = e2e.serve()

    def auth(status: str) -> dict[str, Any] | None:
        body = serve.healthz()
        return body if body and body["checks"]["github_auth"]["status"] == status else None

    health = wait_for("a degraded github_auth", lambda: auth("degraded"),
                      alive=serve.alive, on_timeout=serve.text)
    assert health["status"] == "degraded"
    failure = health["checks"]["github_auth"]["last_failure"]
    assert failure.startswith(f"installation {INSTALLATION_ID} token mint failed: ")
    assert "suspended" in failure
    assert serve.client.get("/healthz").status_code == 200  # degraded still answers 200

    assert e2e.sim.client.delete("/_simulator/faults").status_code == 204
    # The failed refresh is retried at the next cycle (1 s here), not ten cycles later.
    health = wait_for("github_auth to recover", lambda: auth("ok"),
                      alive=serve.alive, on_timeout=serve.text)
    assert health["checks"]["github_auth"]["last_success"] == (
        f"installation {INSTALLATION_ID} token")

    # A store at a schema version this code does not write: failing, 503.
    e2e.db("PRAGMA user_version = 99")
    response = serve.client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["status"] == "failing"
    assert response.json()["checks"]["store"]["status"] == "failing"
    e2e.db(f"PRAGMA user_version = {HEAD_VERSION}")
    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0


def test_port_replaces_the_configs_port(e2e: E2E) -> None:
    from tests.kit.ports import free_port

    other = free_port()
    assert other != e2e.port
    serve = e2e.serve(args=("--port", str(other)), port=other)
    body = wait_for("serve on --port", serve.healthz, alive=serve.alive, on_timeout=serve.text)
    assert body["checks"]["store"]["status"] == "ok"
    [listening] = wait_for("the listening line", lambda: list(serve.messages("listening")),
                           alive=serve.alive)
    assert listening["port"] == other
    # The image's HEALTHCHECK: the port the config says, unless given the one serve was.
    check = [sys.executable, "-m", "service", "healthcheck", "--config", str(e2e.config)]
    asked = subprocess.run([*check, "--port", str(other)], capture_output=True, text=True,
                           check=False, timeout=30)
    assert asked.returncode == 0, asked.stdout + asked.stderr
    assert asked.stdout.strip().endswith(("/healthz: ok", "/healthz: degraded"))
    nobody = subprocess.run(check, capture_output=True, text=True, check=False, timeout=30)
    assert nobody.returncode == 1 and f":{e2e.port}/healthz:" in nobody.stdout
    serve.signal(signal.SIGTERM)
    assert serve.wait(timeout=20) == 0
