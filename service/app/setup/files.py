"""What registration writes: the first config, the App's secrets, and its ``github`` section.

Secrets go to ``secrets/`` beside the config: the directory mode 0700, each file 0600 from
the moment it exists (created with that mode, then renamed into place, so no reader ever
sees a half-written or world-readable file). The config is edited as text, so the
operator's comments and layout outside the ``github`` section survive; it too is replaced
by a rename.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import yaml

from service.config.schema import BudgetConfig

__all__ = [
    "ADMIN_TOKEN_FILE",
    "SECRETS_DIR",
    "TEMPLATE_BUDGET",
    "key_paths",
    "new_config_text",
    "with_credentials",
    "writable_problem",
    "write_admin_token",
    "write_config",
    "write_private",
]

SECRETS_DIR: Final = "secrets"
#: The admin token a new config names, beside the App's key (relative to the config).
ADMIN_TOKEN_FILE: Final = f"{SECRETS_DIR}/admin-token"

#: The budget a new config starts with: a cautious guess the operator must replace with
#: their own (docs/CONFIG.md, "Why the numbers are required"). One run of max_run_tokens
#: fits two times in the session allowance and three times in the daily one.
TEMPLATE_BUDGET: Final = BudgetConfig(
    enabled=True, session_tokens=1_000_000, weekly_tokens=10_000_000, max_run_tokens=150_000,
    reviewer_share_pct=40,
)

_HEADER: Final = """\
# pr-review-agent configuration, created by `pr-review-agent serve` at {now}.
# docs/CONFIG.md describes every key; `pr-review-agent check-config {name}` checks this file.
#
# The github section is written by the registration page: the App's id and the paths of
# its private key and webhook secret, which are kept in {secrets}/ beside this file.

server:
  host: 0.0.0.0
  port: 8080
  webhook_path: /webhook
{public_url}
  admin_token_file: {admin_token}   # /status, /budget and /metrics need it: docs/OPERATIONS.md
store:
  path: state.db
triggers: {{}}          # who may ask for a review, and when: docs/TRIGGERS.md
engine:
  kind: claude_code   # runs the `claude` CLI with CLAUDE_CODE_OAUTH_TOKEN: docs/ENGINE.md

# REVIEW THIS SECTION before the agent spends anything that matters. These numbers were
# generated as a cautious start, not read from your plan (no plan publishes its limits):
# replace them with your own estimates (docs/BUDGET.md). After an edit, send SIGHUP or
# restart; `pr-review-agent budget --config {name}` shows what is in force.
budget:
{budget}"""


def new_config_text(config_path: Path, now: datetime, budget: BudgetConfig = TEMPLATE_BUDGET,
                    *, public_url: str | None = None) -> str:
    """The first config: every section but ``github``, with a generated budget to review;
    ``public_url`` (``serve --public-url``, checked by the caller) is written as set."""
    keys = [
        ("enabled", "true" if budget.enabled else "false", "false stops every review at once"),
        ("session_tokens", budget.session_tokens,
         "your estimate of the plan's rolling 5-hour limit"),
        ("weekly_tokens", budget.weekly_tokens,
         "your estimate of the plan's rolling weekly limit"),
        ("max_run_tokens", budget.max_run_tokens,
         "reserved for each review; a longer one is cut off"),
        ("reviewer_share_pct", budget.reviewer_share_pct,
         "the agent's share of each window; the rest is for people"),
    ]
    lines = [f"{f'  {key}: {value}':<30}# {comment}" for key, value, comment in keys]
    lines += [
        f"  # With these numbers: {budget.session_limit} tokens per 5 hours "
        f"({budget.session_limit // budget.max_run_tokens} reviews),",
        f"  # {budget.daily_limit} per 24 hours "
        f"({budget.daily_limit // budget.max_run_tokens}), {budget.weekly_limit} per 7 days.",
    ]
    where = ("  # public_url: https://reviews.example.com   # where GitHub reaches this server"
             if public_url is None else
             f"  public_url: {json.dumps(public_url)}   # where GitHub reaches this server")
    return _HEADER.format(now=now.isoformat(timespec="seconds"), name=config_path.name,
                          secrets=SECRETS_DIR, budget="\n".join(lines) + "\n",
                          public_url=where, admin_token=ADMIN_TOKEN_FILE)


def writable_problem(config_path: Path) -> str | None:
    """Why registration could not write beside ``config_path``, or None.

    Checked before the page is served: GitHub's code can be converted only once, so a
    key that could not be saved afterwards would be lost with it.
    """
    directory = config_path.parent
    if not directory.is_dir():
        return f"{directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{directory} is not writable by this user"
    if config_path.exists() and not os.access(config_path, os.W_OK):
        return f"{config_path} is not writable by this user"
    secrets_dir = directory / SECRETS_DIR
    if secrets_dir.exists() and not (secrets_dir.is_dir()
                                     and os.access(secrets_dir, os.W_OK | os.X_OK)):
        return f"{secrets_dir} is not a writable directory"
    return None


def write_admin_token(config_path: Path) -> Path:
    """A new admin token (192 random bits) in ``ADMIN_TOKEN_FILE`` beside the config,
    readable by this user alone; its path. An existing one is kept."""
    path = config_path.parent / ADMIN_TOKEN_FILE
    if not path.exists():
        write_private(path, secrets.token_urlsafe(24) + "\n")
    return path


def key_paths(config_path: Path, app_id: int) -> tuple[Path, Path]:
    """Where App ``app_id``'s private key and webhook secret are kept.

    Named by the App id, so registering again (a new App) never overwrites the secrets of
    an App registered before.
    """
    directory = config_path.parent / SECRETS_DIR
    return directory / f"github-app-{app_id}.pem", directory / f"webhook-secret-{app_id}"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user alone (0600; directory 0700).

    The file is created 0600 under a temporary name, synced, then renamed over ``path``.
    """
    directory = path.parent
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)  # an existing directory is tightened too
    _replace(path, text.encode("utf-8"), mode=0o600)


def _replace(path: Path, data: bytes, *, mode: int) -> None:
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)  # the umask may only have removed bits; make it exact
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
        raise


def write_config(path: Path, text: str) -> None:
    """Replace the config at ``path`` with ``text``, keeping its mode (0600 when new)."""
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    _replace(path, text.encode("utf-8"), mode=mode)


def with_credentials(text: str, app_id: int, key_file: str, secret_file: str) -> str:
    """``text`` (a config) with ``github.app_id`` and the two ``*_file`` keys set.

    Only the ``github`` section is rewritten; its other keys (``api_url``,
    ``repositories``, ...) are kept. Everything else in the file, comments included, is
    left as it was. A file whose top level is a flow mapping (``{...}``) is rewritten
    whole, which drops its comments.
    """
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    data = yaml.safe_load(text)
    if root is None or data is None:
        data, root = {}, None
    if not isinstance(data, dict) or (root is not None
                                      and not isinstance(root, yaml.MappingNode)):
        raise ValueError("the config's top level is not a mapping")
    old = data.get("github") or {}
    if not isinstance(old, dict):
        raise ValueError("the config's github section is not a mapping")
    github: dict[str, Any] = {"app_id": app_id, "private_key_file": key_file,
                              "webhook_secret_file": secret_file}
    github.update((k, v) for k, v in old.items() if k not in github)
    block = yaml.safe_dump({"github": github}, sort_keys=False, default_flow_style=False)
    if root is None:
        return block + text
    if root.flow_style:
        data = {"github": github, **{k: v for k, v in data.items() if k != "github"}}
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    for key_node, value_node in root.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == "github":
            start, end = key_node.start_mark.index, _line_end(text, _content_end(value_node))
            return text[:start] + block + text[end:]
    # No github section: put it before the first key, after any leading comments.
    first = root.value[0][0].start_mark.index if root.value else len(text)
    return text[:first] + block + text[first:]


def _content_end(node: yaml.Node) -> int:
    """Where ``node``'s own text ends: a block collection ends with its last child, not
    at the next key (PyYAML's end mark), so comments before that key are kept."""
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode) and not node.flow_style \
            and node.value:
        last = node.value[-1]
        return _content_end(last[1] if isinstance(last, tuple) else last)
    return int(node.end_mark.index)


def _line_end(text: str, index: int) -> int:
    """The index just past the newline that ends the line holding ``index``."""
    if index > 0 and text[index - 1] == "\n":  # a block scalar ends past its newline
        return index
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1
