"""``GET /status`` as HTML for people: pure rendering of a ``StatusView``.

One self-contained page — no script, no outside asset, one stylesheet allowed by its hash
in a strict Content-Security-Policy (``CSP``) — readable on a phone. Every figure is also
in a ``<data value>`` element, so a test (or a scraper) reads the exact number a person
sees. Everything that came from GitHub or the store is escaped.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from datetime import datetime, timedelta
from html import escape
from typing import Final

from service.app.status_view import StatusView, Waiting
from service.budget.windows import WindowState

__all__ = ["CSP", "HEADERS", "render_status"]

_CSS: Final = """
:root{color-scheme:light dark;--ok:#15803d;--warn:#b45309;--bad:#b91c1c;--muted:#6b7280;
--spent:#2563eb;--reserved:#93c5fd;--track:#e5e7eb}
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:0 12px}
main{max-width:980px;margin:0 auto;padding-bottom:32px}
h1{font-size:1.3em;margin:16px 0 4px}h2{font-size:1.1em;margin:24px 0 8px;
border-bottom:1px solid var(--track);padding-bottom:4px}h3{font-size:1em;margin:12px 0 4px}
.muted{color:var(--muted)}.ok{color:var(--ok)}.degraded{color:var(--warn)}
.failing{color:var(--bad)}.pill{display:inline-block;padding:0 8px;border-radius:9px;
border:1px solid currentColor;font-weight:600}
svg.bar{width:100%;height:18px;display:block}svg.bar .track{fill:var(--track)}
svg.bar .spent{fill:var(--spent)}svg.bar .reserved{fill:var(--reserved)}
.window{margin:8px 0 14px}.legend{font-size:.9em}
table{border-collapse:collapse;width:100%;font-size:.92em}
th,td{text-align:left;padding:4px 8px 4px 0;border-bottom:1px solid var(--track);
vertical-align:top}th{font-weight:600}
.scroll{overflow-x:auto}code{font-size:.9em;word-break:break-all}
a{color:var(--spent)}
"""
_HASH: Final = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()
#: No script, nothing fetched, not framed, no form: the page can only show.
CSP: Final = (f"default-src 'none'; style-src 'sha256-{_HASH}'; base-uri 'none'; "
              "form-action 'none'; frame-ancestors 'none'")
HEADERS: Final = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                  "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
                  "X-Frame-Options": "DENY"}
REFRESH_SECONDS: Final = 60


def render_status(view: StatusView, *, web_url: str) -> str:
    """The page. ``web_url`` is GitHub's web root (links to pull requests)."""
    parts = [
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
        "<title>pr-review-agent status</title>", f"<style>{_CSS}</style></head>",
        "<body><main>", _header(view), _budget(view), _queue(view, web_url),
        _runs(view, web_url), _polls(view), _health(view), "</main></body></html>",
    ]
    return "\n".join(parts)


# -- pieces ---------------------------------------------------------------------------------

def _num(value: int | float, shown: str | None = None) -> str:
    text = shown if shown is not None else f"{value:,}".replace(",", "\u202f")
    return f'<data value="{value}">{escape(text)}</data>'


def _when(at: datetime | None, now: datetime) -> str:
    if at is None:
        return '<span class="muted">never</span>'
    iso = at.isoformat(timespec="seconds")
    return f'<time datetime="{iso}" title="{iso}">{escape(_relative(at - now))}</time>'


def _relative(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    future, seconds = seconds > 0, abs(seconds)
    if seconds < 60:
        text = f"{seconds} s"
    elif seconds < 3600:
        text = f"{seconds // 60} min"
    elif seconds < 86400:
        text = f"{seconds // 3600} h {seconds % 3600 // 60} min"
    else:
        text = f"{seconds // 86400} d {seconds % 86400 // 3600} h"
    return f"in {text}" if future else f"{text} ago"


def _pr(repo: str, number: int, web_url: str) -> str:
    href = escape(f"{web_url}/{repo}/pull/{number}", quote=True)
    return f'<a href="{href}" rel="noreferrer">{escape(repo)}#{number}</a>'


def _table(head: Iterable[str], rows: list[list[str]], empty: str) -> str:
    if not rows:
        return f'<p class="muted">{escape(empty)}</p>'
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody>' \
           "</table></div>"


def _header(view: StatusView) -> str:
    status = str(view.health.get("status", "unknown"))
    return (f'<header><h1>pr-review-agent</h1><p><span class="pill {escape(status)}" '
            f'id="overall">{escape(status)}</span> <span class="muted">at '
            f"{escape(view.now.isoformat(timespec='seconds'))}</span></p></header>")


def _budget(view: StatusView) -> str:
    snap = view.budget
    breaker = snap.breaker
    shut = ("closed" if not breaker.tripped
            else f"open until {_when(breaker.tripped_until, view.now)}")
    disabled = "" if snap.enabled else " (reviews disabled: budget.enabled is false)"
    pct = _num(breaker.effective_pct, f"{breaker.effective_pct} %")
    lines = ['<section id="budget"><h2>Budget</h2>',
             f'<p>Rung <strong id="rung">{escape(snap.mode.value)}</strong>{disabled}'
             f' · breaker <strong id="breaker">{shut}</strong> · limits at {pct}'
             f" · {_num(snap.max_run_tokens)} tokens reserved per run</p>"]
    lines += [_window(w, view.now) for w in snap.windows]
    if snap.monthly is not None:
        monthly = snap.monthly
        limit = ("no limit" if monthly.limit_micro is None
                 else f"of ${monthly.limit_micro / 1e6:,.2f}")
        dollars = monthly.charged_micro / 1e6
        lines.append(f'<p id="monthly">Last 30 days: '
                     f"{_num(round(dollars, 2), f'${dollars:,.2f}')} {escape(limit)}</p>")
    lines.append("</section>")
    return "\n".join(lines)


def _window(w: WindowState, now: datetime) -> str:
    limit = max(w.limit, 1)
    spent = min(1000.0, 1000 * w.spent / limit)
    reserved = min(1000.0 - spent, 1000 * w.reserved / limit)
    hours = w.duration_seconds // 3600
    span = f"{hours // 24} d" if hours >= 24 else f"{hours} h"
    label = (f"{w.name}: {w.spent} spent and {w.reserved} reserved of {w.limit} tokens "
             f"({w.utilisation:.1%})")
    return (f'<div class="window" id="window-{escape(w.name)}"><h3>{escape(w.name)} '
            f'<span class="muted">({span})</span></h3>'
            f'<svg class="bar" viewBox="0 0 1000 18" preserveAspectRatio="none" role="img" '
            f'aria-label="{escape(label, quote=True)}"><rect class="track" width="1000" '
            f'height="18"/><rect class="spent" width="{spent:.1f}" height="18"/>'
            f'<rect class="reserved" x="{spent:.1f}" width="{reserved:.1f}" height="18"/></svg>'
            f'<p class="legend"><span class="spent">{_num(w.spent)} spent</span> · '
            f'<span class="reserved">{_num(w.reserved)} reserved</span> · of '
            f'<span class="limit">{_num(w.limit)}</span> · '
            f'<span class="utilisation">{_num(w.utilisation, f"{w.utilisation:.1%}")}</span>'
            f" · frees {_when(w.frees_at, now) if w.frees_at else 'nothing to free'}</p></div>")


def _why(waiting: Waiting, now: datetime) -> str:
    if waiting.not_before is not None:
        return f"retry or deferral: not before {_when(waiting.not_before, now)}"
    refusal = waiting.refusal
    if refusal is None:
        return "next in line"
    window = f" ({escape(refusal.window)})" if refusal.window else ""
    frees = f", frees {_when(refusal.frees_at, now)}" if refusal.frees_at else ""
    return f"budget: {escape(refusal.reason)}{window}{frees}"


def _queue(view: StatusView, web_url: str) -> str:
    counts = " · ".join(f'<span id="queue-{escape(s)}">{escape(s)} {_num(n)}</span>'
                        for s, n in view.queue.items() if n or s in ("pending", "claimed"))
    deferred = sum(1 for w in view.waiting if w.not_before is not None or w.refusal)
    running = [[_pr(r.repo, r.pr_number, web_url), escape(r.asked_for),
                escape(r.owner or ""), _when(r.leased_until, view.now)]
               for r in view.claimed]
    waiting = [[_pr(w.row.repo, w.row.pr_number, web_url),
                escape(w.row.asked_for),
                _when(w.row.enqueued_at, view.now), str(w.row.attempts), _why(w, view.now)]
               for w in view.waiting]
    return "\n".join([
        '<section id="queue"><h2>Queue</h2>', f"<p>{counts} · deferred "
        f'<span id="queue-deferred">{_num(deferred)}</span></p>',
        "<h3>Running</h3>", _table(("Pull request", "Work", "Worker", "Lease until"), running,
                                   "nothing running"),
        "<h3>Waiting</h3>", _table(("Pull request", "Work", "Queued", "Attempts", "Why"),
                                   waiting, "nothing waiting"),
        "</section>"])


def _runs(view: StatusView, web_url: str) -> str:
    rows = []
    for r in view.runs:
        stop = "running" if r.stop_reason is None else r.stop_reason
        cost = "" if r.cost_usd is None else f"${r.cost_usd:,.4f}"
        rows.append([_when(r.started_at, view.now), _pr(r.repo, r.pr_number, web_url),
                     escape(r.kind), escape(stop),
                     _num(r.tokens) + ("" if r.confidence in (None, "exact")
                                       else f" ({escape(str(r.confidence))})"),
                     escape(cost), escape(r.publication or "-")])
    return "\n".join(['<section id="runs"><h2>Last runs</h2>',
                      _table(("Started", "Pull request", "Kind", "Stop reason", "Tokens",
                              "Cost", "Published"), rows, "no run yet"), "</section>"])


def _polls(view: StatusView) -> str:
    rows = [[escape(p.repo), _when(p.polled_at, view.now),
             '<span class="ok">ok</span>' if p.error is None
             else f'<span class="failing">{escape(p.error)}</span>',
             _when(p.succeeded_at, view.now)] for p in view.polls]
    if view.log_read_up_to is None:
        log_line = "Delivery log: not read yet."
    else:
        log_line = (f"Delivery log: read up to a delivery made "
                    f"{_when(view.log_read_up_to, view.now)}; "
                    f"{_num(view.redeliveries_awaited)} redelivery(ies) awaited.")
    return "\n".join(['<section id="poller"><h2>Poller</h2>', f"<p>{log_line}</p>",
                      _table(("Repository", "Last poll", "Result", "Last success"), rows,
                             "no repository polled yet"), "</section>"])


def _health(view: StatusView) -> str:
    checks = view.health.get("checks", {})
    rows = []
    if isinstance(checks, dict):
        for name, check in checks.items():
            status = str(check.get("status", "")) if isinstance(check, dict) else ""
            detail = ""
            if isinstance(check, dict):
                detail = str(check.get("detail") or check.get("error")
                             or check.get("last_failure") or "")
            rows.append([escape(name), f'<span class="{escape(status)}">{escape(status)}</span>',
                         escape(detail)])
    return "\n".join(['<section id="health"><h2>Health</h2>',
                      _table(("Check", "Status", "Detail"), rows, "no checks"), "</section>"])
