"""The registration's pure parts: the manifest built from the packaged document, the
registration and install URLs, the public URL."""

from __future__ import annotations

import json

import pytest

from service.app.setup.manifest import (
    MANIFEST,
    build_manifest,
    install_url,
    public_url_for,
    registration_url,
)
from service.config.connections import ServerConfig
from tests.kit.paths import CHECKOUT
from tests.simulator import World

ROOT = CHECKOUT


def test_the_packaged_manifest_is_app_manifest_json() -> None:
    # The wheel carries service/, not the repository's top level: one document, two homes.
    assert json.loads((ROOT / "app-manifest.json").read_text()) == MANIFEST


def test_registration_urls_for_a_person_and_an_organisation() -> None:
    assert registration_url("https://github.com", "s t") == \
        "https://github.com/settings/apps/new?state=s+t"
    assert registration_url("https://ghe.example.com", "abc", "acme-corp") == \
        "https://ghe.example.com/organizations/acme-corp/settings/apps/new?state=abc"
    with pytest.raises(ValueError, match="organisation"):
        registration_url("https://github.com", "abc", "../admin")
    assert install_url("https://github.com/apps/x/") == \
        "https://github.com/apps/x/installations/new"


@pytest.mark.parametrize(("server", "override", "expected"), [
    (ServerConfig(), None, "http://localhost:8080"),
    (ServerConfig(host="10.0.0.5", port=9000), None, "http://10.0.0.5:9000"),
    (ServerConfig(host="::1", port=9000), None, "http://[::1]:9000"),
    (ServerConfig(public_url="https://r.example"), None, "https://r.example"),
    (ServerConfig(public_url="https://r.example"), "https://o.example/", "https://o.example"),
])
def test_the_public_url_comes_from_the_flag_the_config_or_the_address(
        server: ServerConfig, override: str | None, expected: str) -> None:
    assert public_url_for(server, override) == expected


def test_a_bad_public_url_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="--public-url must be an http"):
        public_url_for(ServerConfig(), "reviews.example.com")


def test_the_built_manifest_is_one_github_accepts() -> None:
    manifest = build_manifest("https://r.example/agent", "https://r.example/agent/hook")
    assert manifest["url"] == "https://r.example/agent"
    assert manifest["hook_attributes"] == {"url": "https://r.example/agent/hook",
                                           "active": True}
    assert manifest["redirect_url"] == "https://r.example/agent/setup/callback"
    assert MANIFEST["hook_attributes"]["url"] == "https://example.invalid/webhook"  # a copy
    World().create_manifest_code(manifest)  # raises as GitHub's form would refuse it
