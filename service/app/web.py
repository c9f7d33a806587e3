"""The HTTP face of the service: the signed webhook route, ``/healthz``, ``/budget``,
``/metrics`` and ``/status``.

``create_app(...)`` builds a FastAPI app from its dependencies (no globals, no environment
reads). The webhook is one FastAPI route, ``POST {server.webhook_path}``, whose handler is
``service.intake.webhook.receiver.WebhookReceiver.handle``; any other method on that path is
FastAPI's 405.
"""

from __future__ import annotations

import base64
import hmac
import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Final

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from service.app.status_page import HEADERS as STATUS_HEADERS
from service.app.status_page import render_status
from service.app.status_view import read_status
from service.budget.governor import Governor
from service.config.schema import Config
from service.config.secret import Secret
from service.github.urls import web_url_for
from service.intake.rules.decisions import TriggerContext
from service.intake.webhook.deliveries import STORE_ERRORS, DeliveryLog, InstallationChange
from service.intake.webhook.delivery import Delivery, Result
from service.intake.webhook.receiver import RETRY_AFTER, WebhookReceiver
from service.observe.health import FAILING, Health
from service.observe.metrics.exposition import CONTENT_TYPE, render
from service.observe.metrics.instruments import Metrics
from service.observe.metrics.state import StoreState
from service.storage.database import Database

__all__ = ["Delivery", "DeliveryLog", "InstallationChange", "Result", "create_app"]

log = logging.getLogger(__name__)

#: The admin routes' answers are about this moment and this operator: never kept by a cache.
NO_STORE: Final = {"Cache-Control": "no-store"}

Clock = Callable[[], datetime]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _bearer_matches(header: str | None, token: Secret, *, basic: bool = False) -> bool:
    """``Authorization: Bearer <token>`` (or, with ``basic``, HTTP Basic with the token as
    the password and any user name: what a browser sends), compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() == "basic" and basic:
        try:
            given = base64.b64decode(given.strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return False
        given = given.partition(":")[2]
    elif scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"),
                               token.reveal().encode("utf-8"))


def create_app(
    *,
    config: Config,
    store: Database,
    governor: Governor,
    triggers: Callable[[], TriggerContext],
    health: Health,
    clock: Clock,
    on_installation_change: Callable[[InstallationChange], None] | None = None,
    on_enqueued: Callable[[], None] | None = None,
    metrics: Metrics | None = None,
    environ: Mapping[str, str] | None = None,
) -> FastAPI:
    """The web app.

    ``triggers`` returns the current ``TriggerContext`` and is called once per delivery, so
    a context replaced later (once the App's slug is known) applies at once. ``clock``
    returns aware UTC now. ``on_installation_change`` is called on the event loop after an
    installation change has committed, so the poller can refresh its repository list.
    ``on_enqueued`` is called after a delivery that queued work has committed (the
    workers' ``wake``). ``metrics`` are this process's instruments (a private set when
    None); ``environ`` is read for ``PROMETHEUS_MULTIPROC_DIR`` only.
    """
    admin_token = config.server.admin_token
    admin_open = config.server.admin == "open"
    metrics = metrics if metrics is not None else Metrics()
    state = StoreState(store, governor, clock)
    scrape_env = dict(environ or {})
    receiver = WebhookReceiver(config, DeliveryLog(store, triggers), clock,
                               on_installation_change, on_enqueued, metrics=metrics)
    # No redirect for a trailing slash: Starlette builds it from the request's Host header,
    # which would send a person to whatever host an outsider names.
    app = FastAPI(title="pr-review-agent", docs_url=None, redoc_url=None, openapi_url=None,
                  redirect_slashes=False)

    @app.post(config.server.webhook_path, include_in_schema=False)
    async def webhook(request: Request) -> Response:
        return await receiver.handle(request)

    @app.get("/healthz")
    async def healthz() -> Response:
        report = await anyio.to_thread.run_sync(health.report, clock())
        return JSONResponse(report, status_code=503 if report["status"] == FAILING else 200)

    def refused(request: Request, *, page: bool = False) -> Response | None:
        """None when the request may see an admin route: it presents the admin token, or
        ``server.admin`` is ``open``. Else 401 (403 when no token is configured at all,
        which no request can present). A ``page`` is for a browser: it also takes the
        token as the Basic password (the browser asks for it)."""
        if admin_open:
            return None
        if admin_token is None:
            why = ("no admin token is configured: set server.admin_token_file (or "
                   "server.admin: open, which shows this to anyone who can reach the server)")
            if page:
                return HTMLResponse(f"<!doctype html><title>403</title><p>{why}</p>",
                                    status_code=403, headers=STATUS_HEADERS)
            return _error(403, why, NO_STORE)
        if _bearer_matches(request.headers.get("authorization"), admin_token, basic=page):
            return None
        if page:
            return HTMLResponse(
                "<!doctype html><title>401</title><p>The status page needs the admin token "
                "as the password (any user name).</p>", status_code=401,
                headers={**STATUS_HEADERS,
                         "WWW-Authenticate": 'Basic realm="pr-review-agent", charset="UTF-8"'})
        return _error(401, "a valid admin bearer token is required",
                      {"WWW-Authenticate": "Bearer", **NO_STORE})

    web_url = web_url_for(config.github.api_url)

    @app.get("/status")
    async def status(request: Request) -> Response:
        if (denied := refused(request, page=True)) is not None:
            return denied
        try:
            view = await anyio.to_thread.run_sync(read_status, store, governor, health, clock())
        except STORE_ERRORS as exc:
            log.error("status page failed: store failure", extra={"error": type(exc).__name__})
            return HTMLResponse("<!doctype html><title>503</title><p>The store is unavailable."
                                "</p>", status_code=503,
                                headers={**STATUS_HEADERS, "Retry-After": RETRY_AFTER})
        return HTMLResponse(render_status(view, web_url=web_url), headers=STATUS_HEADERS)

    @app.get("/metrics")
    async def metrics_route(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        body = await anyio.to_thread.run_sync(render, metrics, state, scrape_env)
        return Response(body, media_type=CONTENT_TYPE, headers=NO_STORE)

    @app.get("/budget")
    async def budget(request: Request) -> Response:
        if (denied := refused(request)) is not None:
            return denied
        try:
            snapshot = await anyio.to_thread.run_sync(governor.snapshot, clock())
        except STORE_ERRORS as exc:
            log.error("budget snapshot failed: store failure",
                      extra={"error": type(exc).__name__})
            return _error(503, "the store is unavailable",
                          {"Retry-After": RETRY_AFTER, **NO_STORE})
        return JSONResponse(snapshot.as_json(), headers=NO_STORE)

    return app
