"""app-manifest.json asks for what the App needs and nothing more, in a form GitHub accepts.

The rules are GITHUB-PLATFORM.md §1: each default event needs its permission (a manifest
listing issue_comment without issues is rejected: "Default events are not supported by
permissions: issue_comment"); installation events are delivered anyway and not listed;
a name is at most 34 characters; reacting to a pull request's conversation comment needs
pull_requests: write in practice, although the docs list it under issues.
"""

from __future__ import annotations

import json

from tests.kit.paths import CHECKOUT

MANIFEST = json.loads((CHECKOUT / "app-manifest.json").read_text())

# Which permission an event subscription needs (webhook-events-and-payloads).
EVENT_PERMISSION = {
    "pull_request": "pull_requests",
    "pull_request_review": "pull_requests",
    "pull_request_review_comment": "pull_requests",
    "pull_request_review_thread": "pull_requests",
    "issue_comment": "issues",
    "check_run": "checks",
    "check_suite": "checks",
}

# What the App calls, and the permission each call needs (permissions-required-for-github-apps).
ENDPOINT_PERMISSION = {
    "POST /repos/{o}/{r}/pulls/{n}/reviews": ("pull_requests", "write"),
    "POST /repos/{o}/{r}/pulls/comments/{id}/reactions": ("pull_requests", "write"),
    "POST /repos/{o}/{r}/issues/comments/{id}/reactions": ("issues", "write"),
    "POST /repos/{o}/{r}/issues/{n}/reactions": ("issues", "write"),
    "POST /repos/{o}/{r}/issues/{n}/comments": ("issues", "write"),
    "PATCH /repos/{o}/{r}/pulls/{n}": ("pull_requests", "write"),
    "POST /repos/{o}/{r}/check-runs": ("checks", "write"),
    "PATCH /repos/{o}/{r}/check-runs/{id}": ("checks", "write"),
    "GET /repos/{o}/{r}/commits/{ref}/check-runs": ("checks", "read"),
    "GET /repos/{o}/{r}/pulls": ("pull_requests", "read"),
    "GET /repos/{o}/{r}/issues/comments": ("issues", "read"),
    "git clone": ("contents", "read"),
}
LEVEL = {"read": 1, "write": 2}


def test_every_event_is_covered_by_a_permission() -> None:
    permissions = MANIFEST["default_permissions"]
    for event in MANIFEST["default_events"]:
        assert EVENT_PERMISSION[event] in permissions, event


def test_exactly_the_events_the_agent_acts_on() -> None:
    assert sorted(MANIFEST["default_events"]) == [
        "issue_comment", "pull_request", "pull_request_review_comment"]
    # Delivered to every App without asking; listing them is at best noise.
    assert "installation" not in MANIFEST["default_events"]
    assert "installation_repositories" not in MANIFEST["default_events"]


def test_every_call_the_agent_makes_is_permitted_and_nothing_more_is_asked() -> None:
    permissions = MANIFEST["default_permissions"]
    for call, (name, level) in ENDPOINT_PERMISSION.items():
        assert name in permissions, call
        assert LEVEL[permissions[name]] >= LEVEL[level], call
    # Minimal: checks for the check runs every trigger gets, no administration, no secrets.
    assert permissions == {"pull_requests": "write", "issues": "write",
                           "contents": "read", "metadata": "read", "checks": "write"}


def test_the_manifest_has_what_github_requires() -> None:
    assert len(MANIFEST["name"]) <= 34
    assert MANIFEST["url"].startswith("https://")
    assert MANIFEST["hook_attributes"]["url"]
    assert MANIFEST["hook_attributes"]["active"] is True
    assert MANIFEST["public"] is False
    # OAuth-on-install and a setup URL cannot both be set; we use neither.
    assert not MANIFEST.get("request_oauth_on_install")
    allowed = {"name", "url", "hook_attributes", "redirect_url", "callback_urls", "setup_url",
               "description", "public", "default_events", "default_permissions",
               "request_oauth_on_install", "setup_on_update"}
    assert set(MANIFEST) <= allowed
