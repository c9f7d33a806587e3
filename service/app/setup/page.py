"""The registration page: the web app ``serve`` runs until the GitHub App is registered.

Routes:

- ``GET /?key=KEY`` — the form: personal account or organisation, and the webhook URL.
  ``KEY`` is the one-time setup key ``serve`` prints on its console; without it the page
  only says where to find the link, so a stranger who reaches the port first cannot
  register an App of theirs into this server's config.
- ``POST /setup/register`` — checks the key again, starts a registration and answers a
  page whose form posts the manifest to GitHub (submitted by a script, or by a button).
- ``GET /setup/callback?code=…&state=…`` — GitHub's redirect: completes the registration
  and links to the App's install page.
- ``GET /healthz`` — 503 ``{"status": "registration_needed"}``;
  ``POST {webhook_path}`` — 503 with ``Retry-After`` (GitHub pings the new App at once).

Every page is ``no-store``, never framed, sends no referrer, and may post forms only to
itself and to GitHub. No page shows a secret.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable, Callable
from html import escape
from typing import Final
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from service.app.setup.manifest import CALLBACK_PATH, valid_login
from service.app.setup.registrar import Registered, Registrar, RegistrationError
from service.config.checks import public_url_problem

__all__ = ["create_setup_app"]

#: A registration form is a few hundred bytes; anything near this is not one.
MAX_FORM_BYTES: Final = 16 * 1024

_STYLE: Final = """
body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;
color:#1f2328}
h1{font-size:1.5rem}label{display:block;margin:.4rem 0}input[type=text]{width:100%;
padding:.3rem;font:inherit}button{font:inherit;padding:.5rem 1rem;margin-top:1rem}
code{background:#f0f0f0;padding:0 .2rem}.note{color:#59636e;font-size:.9rem}
.error{border-left:4px solid #d1242f;padding-left:.8rem}
"""


def _page(title: str, body: str, *, status: int = 200, nonce: str | None = None,
          form_action: str = "'self'", background: BackgroundTask | None = None,
          ) -> HTMLResponse:
    script = f"'nonce-{nonce}'" if nonce else "'none'"
    headers = {
        "Content-Security-Policy": (f"default-src 'none'; style-src 'unsafe-inline'; "
                                    f"script-src {script}; form-action {form_action}; "
                                    "frame-ancestors 'none'; base-uri 'none'"),
        "Cache-Control": "no-store",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
    }
    html = (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width'>"
            f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
            f"<body><h1>{escape(title)}</h1>{body}</body></html>")
    return HTMLResponse(html, status_code=status, headers=headers, background=background)


def _error_page(message: str, status: int) -> HTMLResponse:
    return _page("Registration did not complete",
                 f"<p class=error>{escape(message)}</p><p><a href='../'>Back</a> (open the "
                 "link <code>serve</code> printed, with its key)</p>", status=status)


_NEED_KEY: Final = (
    "<p>This pr-review-agent is not registered with GitHub yet.</p>"
    "<p>Open the link that <code>pr-review-agent serve</code> printed on its console when it "
    "started (in <code>docker compose logs</code> or <code>journalctl</code> if it runs "
    "there): it carries a one-time setup key, so that only whoever runs this server can "
    "register its App.</p>")


def _form(registrar: Registrar, key: str) -> str:
    return (
        "<p>This pr-review-agent has no GitHub App yet. Registering creates one from the "
        "agent's manifest (the permissions and events it needs, nothing more) and saves its "
        "private key and webhook secret beside the config. GitHub shows you the App before "
        "you create it, and lets you change its name.</p>"
        # Relative: behind a proxy that serves the agent under a path, it stays there.
        "<form method=post action='setup/register'>"
        f"<input type=hidden name=key value='{escape(key, quote=True)}'>"
        "<label><input type=radio name=owner value=user checked> "
        "my personal account</label>"
        "<label><input type=radio name=owner value=org> the organisation:</label>"
        "<input type=text name=org placeholder='organisation name' autocomplete=off>"
        "<label for=webhook_url>Webhook URL (where GitHub will deliver events):</label>"
        f"<input type=text id=webhook_url name=webhook_url "
        f"value='{escape(registrar.webhook_url, quote=True)}'>"
        "<p class=note>It must be reachable from GitHub. If it is not (a laptop, a private "
        "network), reviews still happen: the poller finds new pull requests and comments "
        "every <code>poller.interval_seconds</code>. For local development a forwarding URL "
        "such as a smee.io channel goes here (docs/DEVELOPMENT.md).</p>"
        "<button type=submit>Register the GitHub App</button></form>"
        f"<p class=note>GitHub: <code>{escape(registrar.web_url)}</code> · config: "
        f"<code>{escape(str(registrar.config_path))}</code></p>")


def _to_github(action: str, manifest: str, nonce: str) -> str:
    return (
        f"<form id=manifest method=post action='{escape(action, quote=True)}'>"
        f"<input type=hidden name=manifest value='{escape(manifest, quote=True)}'>"
        "<p>Taking you to GitHub to create the App…</p>"
        "<button type=submit>Continue to GitHub</button></form>"
        f"<script nonce='{nonce}'>document.getElementById('manifest').submit()</script>")


def _done(registered: Registered) -> str:
    return (
        f"<p>GitHub created the App <b>{escape(registered.name)}</b> (id "
        f"{registered.app_id}). Its private key and webhook secret are saved in "
        f"<code>{escape(str(registered.key_file.parent))}</code> (readable by the service's "
        "user alone), and the config now names them.</p>"
        "<p>The service is starting with the new App now: this page goes away, and the "
        "webhook receiver, the poller and the workers take its place.</p>"
        f"<p><b>Next: <a href='{escape(registered.install_url, quote=True)}'>install the App "
        "on your repositories</a></b>. Then open a pull request, or write <code>@claude "
        "review</code> on one.</p>"
        "<p class=note>Before it spends anything that matters, review the <code>budget</code> "
        "section of the config (docs/BUDGET.md).</p>")


def create_setup_app(registrar: Registrar, *, setup_key: str, webhook_path: str,
                     on_registered: Callable[[Registered], Awaitable[None] | None],
                     ) -> Starlette:
    """The registration web app.

    ``setup_key`` is the one-time key the console link carries. ``on_registered`` is
    called once the success page has been sent (the daemon then switches to serving).
    """

    def key_ok(candidate: str) -> bool:
        return hmac.compare_digest(candidate.encode("utf-8", "replace"),
                                   setup_key.encode("utf-8"))

    async def index(request: Request) -> Response:
        key = request.query_params.get("key", "")
        if not key_ok(key):
            return _page("Register the GitHub App", _NEED_KEY, status=403)
        return _page("Register the GitHub App", _form(registrar, key))

    async def register(request: Request) -> Response:
        form = await _read_form(request)
        if form is None:
            return _error_page("The form was too large or not a form.", 400)
        if not key_ok(form.get("key", "")):
            return _page("Register the GitHub App", _NEED_KEY, status=403)
        org: str | None = None
        if form.get("owner") == "org":
            org = form.get("org", "").strip()
            if not valid_login(org):
                return _error_page("Give the organisation's name (letters, digits and "
                                   "hyphens), as in github.com/NAME.", 400)
        webhook_url = form.get("webhook_url", "").strip() or registrar.webhook_url
        problem = public_url_problem(webhook_url)
        if problem is not None:
            return _error_page(f"The webhook URL {problem}.", 400)
        try:
            started = registrar.start(org, webhook_url)
        except RegistrationError as exc:
            return _error_page(exc.message, exc.status)
        nonce = secrets.token_urlsafe(16)
        manifest = json.dumps(started.manifest, separators=(",", ":"))
        return _page("Register the GitHub App", _to_github(started.action, manifest, nonce),
                     nonce=nonce, form_action=f"'self' {registrar.web_url}")

    async def callback(request: Request) -> Response:
        code = request.query_params.get("code", "")
        state = request.query_params.get("state", "")
        try:
            registered = await registrar.complete(code, state)
        except RegistrationError as exc:
            return _error_page(exc.message, exc.status)

        async def announce() -> None:
            result = on_registered(registered)
            if result is not None:
                await result

        return _page("The GitHub App is registered", _done(registered),
                     background=BackgroundTask(announce))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "registration_needed", "checks": {
            "registration": "the GitHub App is not registered yet; open the link "
                            "`pr-review-agent serve` printed"}}, status_code=503)

    async def webhook(request: Request) -> Response:
        return JSONResponse({"error": "the GitHub App's registration is not complete yet"},
                            status_code=503, headers={"Retry-After": "60"})

    return Starlette(routes=[
        Route("/", index, methods=["GET"]),
        Route("/setup/register", register, methods=["POST"]),
        Route(CALLBACK_PATH, callback, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route(webhook_path, webhook, methods=["POST"]),
    ])


async def _read_form(request: Request) -> dict[str, str] | None:
    """An ``application/x-www-form-urlencoded`` body as a dict (first value of each
    field), or None when it is larger than ``MAX_FORM_BYTES`` or not such a form."""
    if request.headers.get("content-type", "").split(";")[0].strip() != \
            "application/x-www-form-urlencoded":
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return None
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        return None
    return {name: values[0] for name, values in fields.items()}
