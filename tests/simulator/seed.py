"""Building a ``World`` from a JSON state file (the schema is in README.md).

Relative paths in the file (``public_key_file``, ``git_dir``, ``diff_file``) are resolved
against the file's directory. Unknown keys are errors, so a typo never silently seeds an
empty world.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .clock import SimClock, parse_iso
from .settings import Settings
from .state import World

TOP_LEVEL = {"settings", "clock", "api_url", "web_url", "app", "apps", "users", "repositories",
             "installations", "issues", "pull_requests", "issue_comments", "reviews",
             "review_comments", "manifest_codes"}


def _check(kind: str, item: Any, allowed: set[str], required: set[str]) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValueError(f"{kind}: expected an object, got {item!r}")
    unknown = sorted(set(item) - allowed)
    missing = sorted(required - set(item))
    if unknown:
        raise ValueError(f"{kind}: unknown keys {unknown}")
    if missing:
        raise ValueError(f"{kind}: missing keys {missing}")
    return item


def _when(value: Any) -> Any:
    return parse_iso(value) if isinstance(value, str) else None


def _path(base: Path, value: Any) -> Path | None:
    if value is None:
        return None
    path = Path(str(value))
    return path if path.is_absolute() else base / path


def world_from_json(data: dict[str, Any], *, base_dir: Path) -> World:
    """A world seeded from the parsed state file."""
    unknown = sorted(set(data) - TOP_LEVEL)
    if unknown:
        raise ValueError(f"unknown top-level keys {unknown}")
    clock_cfg = _check("clock", data.get("clock", {}), {"offset_seconds", "frozen_at"}, set())
    clock = SimClock(offset_seconds=float(clock_cfg.get("offset_seconds", 0)),
                     frozen_at=_when(clock_cfg.get("frozen_at")))
    world = World(settings=Settings.from_json(data.get("settings", {})), clock=clock,
                  api_url=data.get("api_url", "https://api.github.com"),
                  web_url=data.get("web_url", "https://github.com"))
    for raw in data.get("users", []):
        item = _check("user", raw, {"login", "id", "type", "association"}, {"login"})
        world.add_user(item["login"], id=item.get("id"), type=item.get("type", "User"),
                       association=item.get("association", "NONE"))
    apps = data.get("apps", []) + ([data["app"]] if "app" in data else [])
    for raw in apps:
        item = _check("app", raw, {"id", "slug", "name", "owner", "public_key_pem",
                                   "public_key_file", "client_id", "client_secret",
                                   "webhook_secret", "permissions", "events", "description"},
                      {"id", "slug"})
        pem = item.get("public_key_pem")
        key_file = _path(base_dir, item.get("public_key_file"))
        if key_file is not None:
            pem = key_file.read_text()
        world.add_app(id=int(item["id"]), slug=item["slug"], name=item.get("name"),
                      public_key_pem=pem, owner=item.get("owner", "octo-org"),
                      client_id=item.get("client_id"), client_secret=item.get("client_secret"),
                      webhook_secret=item.get("webhook_secret"),
                      permissions=item.get("permissions"), events=item.get("events"),
                      description=item.get("description", ""))
    for raw in data.get("repositories", []):
        item = _check("repository", raw, {"full_name", "id", "private", "default_branch",
                                          "git_dir", "owner_type"}, {"full_name"})
        world.add_repository(item["full_name"], id=item.get("id"),
                             private=item.get("private", True),
                             default_branch=item.get("default_branch", "main"),
                             git_dir=_path(base_dir, item.get("git_dir")),
                             owner_type=item.get("owner_type", "Organization"))
    for raw in data.get("installations", []):
        item = _check("installation", raw, {"id", "account", "repositories", "permissions",
                                            "events", "app_id", "suspended"}, {"account"})
        inst = world.add_installation(account=item["account"],
                                      repositories=item.get("repositories"), id=item.get("id"),
                                      app_id=item.get("app_id"),
                                      permissions=item.get("permissions"),
                                      events=item.get("events"))
        if item.get("suspended"):
            inst.suspended_at = world.now()
    _seed_conversations(world, data, base_dir)
    for raw in data.get("manifest_codes", []):
        item = _check("manifest_code", raw, {"code", "manifest"}, {"manifest"})
        world.create_manifest_code(item["manifest"], code=item.get("code"))
    return world


def _seed_conversations(world: World, data: dict[str, Any], base_dir: Path) -> None:
    for raw in data.get("issues", []):
        item = _check("issue", raw, {"repo", "number", "title", "body", "user", "state",
                                     "created_at"}, {"repo", "title", "user"})
        world.add_issue(item["repo"], title=item["title"], user=item["user"],
                        body=item.get("body", ""), number=item.get("number"),
                        state=item.get("state", "open"), created_at=_when(item.get("created_at")))
    for raw in data.get("pull_requests", []):
        item = _check("pull_request", raw, {"repo", "number", "title", "body", "user", "head",
                                            "base", "diff", "diff_file", "draft", "state",
                                            "merged", "created_at", "updated_at", "commits"},
                      {"repo", "title", "user", "head", "base"})
        head = _check("head", item["head"], {"sha", "ref"}, {"sha"})
        base = _check("base", item["base"], {"sha", "ref"}, {"sha"})
        diff = item.get("diff")
        diff_file = _path(base_dir, item.get("diff_file"))
        if diff_file is not None:
            diff = diff_file.read_text()
        world.add_pull(item["repo"], title=item["title"], user=item["user"],
                       head_sha=head["sha"], base_sha=base["sha"], diff=diff,
                       number=item.get("number"), body=item.get("body", ""),
                       head_ref=head.get("ref", "feature"), base_ref=base.get("ref", "main"),
                       draft=item.get("draft", False), state=item.get("state", "open"),
                       merged=item.get("merged", False), commits=item.get("commits"),
                       created_at=_when(item.get("created_at")),
                       updated_at=_when(item.get("updated_at")))
    for raw in data.get("issue_comments", []):
        item = _check("issue_comment", raw, {"repo", "number", "user", "body", "created_at"},
                      {"repo", "number", "user", "body"})
        world.add_issue_comment(item["repo"], item["number"], user=item["user"],
                                body=item["body"], created_at=_when(item.get("created_at")))
    for raw in data.get("reviews", []):
        item = _check("review", raw, {"repo", "number", "user", "body", "state", "commit_id"},
                      {"repo", "number", "user"})
        world.add_review(item["repo"], item["number"], user=item["user"],
                         body=item.get("body", ""), state=item.get("state", "COMMENTED"),
                         commit_id=item.get("commit_id"))
    for raw in data.get("review_comments", []):
        item = _check("review_comment", raw, {"repo", "number", "user", "body", "path", "line",
                                              "side", "start_line", "commit_id", "created_at"},
                      {"repo", "number", "user", "body", "path", "line"})
        world.add_review_comment(item["repo"], item["number"], user=item["user"],
                                 body=item["body"], path=item["path"], line=item["line"],
                                 side=item.get("side", "RIGHT"),
                                 start_line=item.get("start_line"),
                                 commit_id=item.get("commit_id"),
                                 created_at=_when(item.get("created_at")))


def load_world(path: Path) -> World:
    """Read and seed a world from a JSON state file."""
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: the state file must hold a JSON object")
    return world_from_json(data, base_dir=path.parent)
