"""The budget snapshot as text: what ``pr-review-agent budget`` prints.

It renders ``Snapshot.as_json()`` — the very body ``GET /budget`` returns — so the
command and the endpoint cannot show different numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

_COLUMNS = ("window", "limit", "configured", "spent", "reserved", "remaining", "used",
            "spent $", "frees at")


def _money(value: object) -> str:
    return "-" if value is None else f"${cast(float, value):,.2f}"


def _when(value: object) -> str:
    return "-" if value is None else str(value)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            .rstrip() for row in rows]


def render(body: Mapping[str, object]) -> list[str]:
    """The lines to print for a snapshot body (``Snapshot.as_json()``)."""
    breaker = cast(Mapping[str, object], body["breaker"])
    policy = cast(Mapping[str, object], body["policy"])
    monthly = cast(Mapping[str, object] | None, body.get("monthly"))
    windows = cast(Sequence[Mapping[str, object]], body["windows"])
    pct = cast(int, body["per_actor_pct"])
    inst_pct = cast(int, body.get("per_installation_pct", 100))
    lines = [
        f"budget at {body['now']}: mode {body['mode']}"
        f" ({'enabled' if body['enabled'] else 'DISABLED'}); tightest window {body['tightest']}",
        f"runs: {body['max_run_tokens']} tokens reserved each; per-person cap "
        + ("off" if pct == 100 else f"{pct}% of each window")
        + "; per-installation cap "
        + ("off" if inst_pct == 100 else f"{inst_pct}% of each window")
        + f"; pacer {body['max_reviews_per_pr']} run(s) per pull request per 24 h",
        "breaker: "
        + (f"TRIPPED until {breaker['tripped_until']}" if breaker["tripped"] else "closed")
        + f"; limits at {breaker['effective_pct']}% (calibrated {breaker['calibrated_pct']}%,"
        f" {breaker['trips_remembered']} trip(s) in 365 days, last trip"
        f" {breaker['last_trip_at'] or 'never'})",
    ]
    if policy["authority"] is None:
        lines.append("policy: none published yet; this process's config is in force")
    else:
        verdict = (f"UNREADABLE ({policy['error']}); this process's config is in force"
                   if policy["error"] else
                   "OVERRIDES this process's config" if policy["overrides_local"] else
                   "matches this process's config")
        lines.append(f"policy: published by {policy['authority']} at "
                     f"{_when(policy['written_at'])}; {verdict}")
    rows = [list(_COLUMNS)]
    for w in windows:
        rows.append([
            str(w["name"]), str(w["limit"]), str(w["configured_limit"]), str(w["spent"]),
            str(w["reserved"]), str(w["remaining"]),
            f"{cast(float, w['utilisation']) * 100:.1f}%", _money(w["spent_usd"]),
            _when(w["frees_at"]),
        ])
    lines += _table(rows)
    lines += _installations(body, windows)
    if monthly is not None:
        source = ("observed" if monthly["rate_source"] == "observed" else "starting estimate")
        lines.append(
            "monthly dollars (30 days): limit "
            + (_money(monthly["limit_usd"]) if monthly["limit_usd"] is not None else "none")
            + f"; spent {_money(monthly['spent_usd'])}, unpriced"
            f" {_money(monthly['unpriced_usd'])}, reserved {_money(monthly['reserved_usd'])};"
            f" remaining {_money(monthly['remaining_usd'])}")
        lines.append(
            f"  one run ≈ {_money(monthly['run_estimate_usd'])} at"
            f" {_money(monthly['usd_per_million_tokens'])} per million tokens ({source},"
            f" {monthly['priced_runs']} priced run(s)); frees at {_when(monthly['frees_at'])}")
    return lines


def _installations(body: Mapping[str, object], windows: Sequence[Mapping[str, object]]
                   ) -> list[str]:
    """Spend per installation (and the repository caps), under the windows' table."""
    caps = cast(Mapping[str, int], body.get("repository_reviews_per_day") or {})
    found = cast(Sequence[Mapping[str, object]], body.get("installations") or [])
    lines: list[str] = []
    if caps:
        lines.append("repository caps (runs per 24 h): "
                     + ", ".join(f"{repo} {n}" for repo, n in sorted(caps.items())))
    if not found:
        return [*lines, "spend per installation: nothing charged in the last 7 days"]
    names = [str(w["name"]) for w in windows]
    rows = [["installation", *names]]
    for inst in found:
        spent = cast(Mapping[str, Mapping[str, object]], inst["windows"])
        who = inst["installation_id"]
        rows.append([
            "(not installed)" if who is None else str(who),
            *(str(spent[n]["charged"]) + ("" if spent[n]["cap"] is None
                                          else f" / {spent[n]['cap']}") for n in names)])
    return [*lines, "spend per installation (charged / cap):", *_table(rows)]
