"""Saying what a config means: ``check-config``'s summary, and the docs' key tables.

``describe_config`` is the operator's view of one valid config (never a secret);
``key_tables`` renders docs/CONFIG.md's "Every key" tables from the declarations, and
``repository_key_table`` docs/REPOSITORY-CONFIG.md's, the same way; a test fails when the
docs and the declarations differ, so the reference cannot drift from the code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from service.config.declare import Key, Section, keys_of
from service.config.repository.keys import KEYS as REPOSITORY_KEYS
from service.config.schema import SECTIONS, BudgetConfig, Config

__all__ = ["describe_config", "key_table", "key_tables", "repository_key_table"]


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def describe_config(config: Config) -> list[str]:
    """Human summary lines for ``check-config``: what the file means. Never a secret."""
    gh, srv, trig, budget = config.github, config.server, config.triggers, config.budget
    engine, review = config.engine, config.review
    rotation = " (plus one previous, during a rotation)" if len(gh.webhook_secrets) > 1 else ""
    share = budget.reviewer_share_pct
    # app_id 0 is MissingCredentials' placeholder: the App is not registered yet.
    registered = gh.app_id != 0
    return [
        f"github: app {gh.app_id} at {gh.api_url}" if registered else
        f"github: not registered yet (API {gh.api_url})",
        "repositories: "
        + (", ".join(gh.repositories) if gh.repositories else "every repository installed"),
        f"server: listening on {srv.host}:{srv.port}; webhook at {srv.webhook_path} with "
        + (f"1 secret{rotation}" if registered else "the secret registration creates")
        + f", body limit {srv.max_body_bytes} bytes"
        + (f"; public URL {srv.public_url}" if srv.public_url else ""),
        "GET /budget: "
        + ("needs the admin token" if srv.admin_token is not None else "open (no admin token)"),
        (f"store: PostgreSQL at {config.store.url}" if config.store.url is not None
         else f"store: SQLite file {config.store.path}"),
        f"poller: every {config.poller.interval_seconds} s",
        f"triggers: mention {trig.mention}; auto review {_on(trig.auto_review)}; "
        f"on push {_on(trig.on_push)}",
        "allowed: associations "
        + (", ".join(trig.allowed_associations) or "none")
        + "; users "
        + (", ".join(trig.allowed_users) or "none"),
        f"workers: {config.workers.count}, lease {config.workers.lease_seconds} s",
        f"engine: {engine.kind} (command {engine.command}, model {engine.model or 'default'}, "
        f"max turns {engine.max_turns}, wall clock {engine.wall_clock_seconds} s)"
        + ("; by size: " + ", ".join(
            f"{m.model} up to {m.max_prompt_tokens} tokens" if m.max_prompt_tokens
            else f"{m.model} past the default's window" for m in engine.models)
           if engine.models else ""),
        f"review: max diff lines {review.max_diff_lines}; excluded paths "
        + (", ".join(review.excluded_paths) or "none"),
        f"publish: dry run {_on(config.publish.dry_run)}; describe "
        + ("into the pull request body" if config.publish.describe_updates_body
           else "as a comment"),
        f"retention: purge after close {_on(config.retention.purge_after_close)}"
        + (f", {config.retention.delay_hours} h after the close"
           if config.retention.purge_after_close and config.retention.delay_hours else ""),
        "budget: "
        + ("enabled" if budget.enabled else "DISABLED — a hard stop, nothing is admitted")
        + f"; reviewer share {share}%",
        f"budget window session (5 h): {budget.session_limit} tokens "
        f"({share}% of session_tokens {budget.session_tokens})",
        f"budget window daily (24 h): {budget.daily_limit} tokens "
        f"({share}% of weekly_tokens {budget.weekly_tokens}, ÷ 7)",
        f"budget window weekly (7 d): {budget.weekly_limit} tokens "
        f"({share}% of weekly_tokens {budget.weekly_tokens})",
        f"budget max_run_tokens: {budget.max_run_tokens} reserved per run",
        _describe_per_actor(budget),
        f"budget pacer: at most {budget.max_reviews_per_pr} run(s) per pull request "
        "per 24 h",
        "budget monthly dollars: "
        + ("no cap (monthly_usd not set)" if budget.monthly_usd is None else
           f"${budget.monthly_usd:.2f} per trailing 30 days"),
    ]


def _describe_per_actor(budget: BudgetConfig) -> str:
    pct = budget.per_actor_pct
    if pct == 100:
        return "budget per-person cap: off (per_actor_pct 100)"
    caps = ", ".join(f"{name} {limit * pct // 100}" for name, limit in (
        ("session", budget.session_limit), ("daily", budget.daily_limit),
        ("weekly", budget.weekly_limit)))
    return f"budget per-person cap: {pct}% of each window ({caps} tokens)"


# -- the reference tables ------------------------------------------------------------------


def _default(k: Key) -> str:
    """The Default column: the declared default as YAML, or where a secret comes from."""
    if k.kind == "secret":
        if k.env is None:
            shown = "`null`"
        elif k.required:
            shown = f"env `{k.env}`"
        else:
            shown = f"env `{k.env}`, else none"
    elif k.required:
        shown = "**required**"
    elif k.kind == "counts":
        shown = "`{}`"
    elif k.default is None:
        shown = "`null`"
    elif isinstance(k.default, bool):
        shown = f"`{'true' if k.default else 'false'}`"
    elif isinstance(k.default, tuple):
        shown = f"`{json.dumps(list(k.default))}`"
    else:
        shown = f"`{k.default}`"
    return f"{shown} {k.note}" if k.note else shown


def _rows(declared: Iterable[Key], *, header: str) -> list[str]:
    """A key table: one row per key, its name, its default (or what it inherits), its doc;
    a list of mappings is followed by a row for each key of its items (``rules[].path``)."""
    rows = [header, "|---|---|---|"]
    for k in declared:
        rows.append(f"| `{k.name}` | {k.inherits or _default(k)} | {k.doc} |")
        if k.kind == "items" and k.item is not None:
            rows += [f"| `{k.name}[].{sub.name}` | {_default(sub)} | {sub.doc} |"
                     for _, (sub,) in keys_of(k.item)]
    return rows


def key_table(spec: Section) -> str:
    """One section's heading and key table, as docs/CONFIG.md has it."""
    title = f" {spec.title}" if spec.title else ""
    rows = _rows((k for _, ks in keys_of(spec.cls) for k in ks),
                 header="| Key | Default | Meaning |")
    return "\n".join([f"### `{spec.name}`{title}", "", *rows]) + "\n"


def repository_key_table() -> str:
    """docs/REPOSITORY-CONFIG.md's table of a repository file's keys."""
    return "\n".join(_rows(REPOSITORY_KEYS,
                           header="| Key | When no file sets it | What it does |")) + "\n"


def key_tables() -> list[str]:
    """The "Every key" reference: one table per section, from the declarations."""
    return [key_table(spec) for spec in SECTIONS]
