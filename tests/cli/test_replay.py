"""pr-review-agent replay: a payload posted signed and with GitHub's headers to the server
the config describes, input GitHub would never send refused, and what answered (or did
not) said."""

from __future__ import annotations

import io
import json
from pathlib import Path

import httpx

from service.cli.replay import replay, replay_url
from service.config.strict_yaml import load_config
from service.github.webhooks import check_signature
from tests.webhook_env import SECRET, write_config


def test_replay_posts_the_payload_signed_with_githubs_headers(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path), {})
    payload = tmp_path / "delivery.json"
    payload.write_text(json.dumps({"action": "opened", "number": 2}))
    seen: list[httpx.Request] = []

    def server(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(202, json={"enqueued": []})

    out, err = io.StringIO(), io.StringIO()
    assert replay(config, "pull_request", payload, url=None, out=out, err=err,
                  transport=httpx.MockTransport(server)) == 0
    [request] = seen
    assert str(request.url) == replay_url(config) == (
        f"http://127.0.0.1:{config.server.port}{config.server.webhook_path}")
    assert request.headers["x-github-event"] == "pull_request"
    assert request.content == payload.read_bytes()
    check_signature(request.content, request.headers["x-hub-signature-256"], [SECRET])
    assert "HTTP 202 Accepted" in out.getvalue() and err.getvalue() == ""


def test_replay_refuses_what_github_would_never_send(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path), {})
    not_json, a_list = tmp_path / "a.txt", tmp_path / "b.json"
    not_json.write_text("hello")
    a_list.write_text("[1, 2]")
    cases = [("pull request", a_list, "--event must be an event name"),
             ("pull_request", tmp_path / "missing.json", "cannot read"),
             ("pull_request", not_json, "is not JSON"),
             ("pull_request", a_list, "must hold a JSON object")]
    for event, path, said in cases:
        err = io.StringIO()
        assert replay(config, event, path, url="http://127.0.0.1:9/x", out=io.StringIO(),
                      err=err) == 2
        assert said in err.getvalue()


def test_replay_says_when_nothing_answered(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path), {})
    payload = tmp_path / "delivery.json"
    payload.write_text("{}")

    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    err = io.StringIO()
    assert replay(config, "ping", payload, url=None, out=io.StringIO(), err=err,
                  transport=httpx.MockTransport(down)) == 1
    assert "failed: connection refused" in err.getvalue()
