"""GitHub's web root from its API root (github.com and GitHub Enterprise Server)."""

from __future__ import annotations

import pytest

from service.github.urls import web_url_for


@pytest.mark.parametrize(("api_url", "web_url"), [
    ("https://api.github.com", "https://github.com"),
    ("https://api.github.com/", "https://github.com"),
    ("https://ghe.example.com/api/v3", "https://ghe.example.com"),
    ("https://ghe.example.com:8443/api/v3/", "https://ghe.example.com:8443"),
    ("https://api.acme.ghe.com", "https://acme.ghe.com"),
    ("http://127.0.0.1:9000", "http://127.0.0.1:9000"),
])
def test_the_web_root_follows_the_api_root(api_url: str, web_url: str) -> None:
    assert web_url_for(api_url) == web_url
