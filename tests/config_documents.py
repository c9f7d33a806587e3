"""Config documents the config tests start from: the least a valid file says, and a file
that sets every key."""

from __future__ import annotations

from typing import Any


def minimal() -> dict[str, Any]:
    return {
        "github": {
            "app_id": 123456,
            "private_key_file": "app.pem",
            "webhook_secret_file": "webhook",
        },
        "triggers": {},
        "budget": {"session_tokens": 88000, "weekly_tokens": 1500000, "max_run_tokens": 30000},
    }


def full() -> dict[str, Any]:
    """Every key of the schema, none at its default."""
    return {
        "github": {
            "app_id": 42,
            "private_key_file": "app.pem",
            "webhook_secret_file": "webhook",
            "previous_webhook_secret_file": "webhook.old",
            "api_url": "https://ghe.example.com/api/v3/",
            "repositories": ["acme/widgets", "acme/gadgets.js"],
        },
        "server": {
            "host": "127.0.0.1",
            "port": 9090,
            "webhook_path": "/hooks/github",
            "admin_token_file": "admin",
            "max_body_bytes": 1048576,
        },
        "store": {"path": "data/state.db"},
        "poller": {"interval_seconds": 60},
        "triggers": {
            "mention": "@reviewbot",
            "auto_review": False,
            "on_push": True,
            "allowed_associations": ["OWNER", "CONTRIBUTOR"],
            "allowed_users": ["octocat", "hubot-2"],
        },
        "workers": {"count": 4, "lease_seconds": 1800},
        "engine": {
            "kind": "anthropic",
            "command": "/usr/local/bin/claude",
            "model": "claude-sonnet-4",
            "max_turns": 50,
            "wall_clock_seconds": 600,
        },
        "review": {"excluded_paths": ["*.min.js"], "max_diff_lines": 2000},
        "publish": {"dry_run": True},
        "retention": {"purge_after_close": False},
        "budget": {
            "enabled": False,
            "session_tokens": 100000,
            "weekly_tokens": 2000000,
            "max_run_tokens": 20000,
            "reviewer_share_pct": 25,
        },
    }
