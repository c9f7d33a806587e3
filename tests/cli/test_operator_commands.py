"""The operator's commands beside ``serve``, through the real CLI entry: ``healthcheck``
asks the server the config describes (or the default port when the config does not
load), and ``queue``/``runs`` open the config's store or say why they cannot."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from service.cli.main import main
from tests.kit.ports import free_port
from tests.webhook_env import write_config


class _Healthz(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        body = json.dumps({"status": "ok" if self.status == 200 else "failing"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[HTTPServer]:
    httpd = HTTPServer(("127.0.0.1", 0), _Healthz)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_healthcheck_follows_the_configs_port(tmp_path: Path, server: HTTPServer,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    port = server.server_address[1]
    config = write_config(tmp_path, server={"host": "0.0.0.0", "port": port})
    assert main(["healthcheck", "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip() == f"http://127.0.0.1:{port}/healthz: ok"
    _Healthz.status = 503
    try:
        assert main(["healthcheck", "--config", str(config)]) == 1
        assert "503" in capsys.readouterr().out
    finally:
        _Healthz.status = 200


def test_healthcheck_with_a_broken_config_asks_the_default_port(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "config.yaml"
    broken.write_text("server: [\n")
    nothing = free_port()  # nothing listens there: the check fails, and says where it asked
    assert main(["healthcheck", "--config", str(broken), "--port", str(nothing)]) == 1
    captured = capsys.readouterr()
    assert "does not load" in captured.err and "asking the default port" in captured.err
    assert captured.out.startswith(f"http://127.0.0.1:{nothing}/healthz: ")


def test_queue_and_runs_say_why_a_config_cannot_open_its_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "config.yaml"
    broken.write_text("github: {}\n")
    assert main(["queue", "list", "--config", str(broken)]) == 2
    assert main(["runs", "list", "--config", str(broken)]) == 2
    assert "github.app_id: required" in capsys.readouterr().err


def test_runs_list_on_an_empty_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    assert main(["runs", "list", "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out or "[]") == []
    with pytest.raises(SystemExit) as exited:
        main(["runs", "list", "--config", str(config), "--limit", "0"])
    assert exited.value.code == 2
