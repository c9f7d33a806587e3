"""The simulator's ASGI application: GitHub's request pipeline around the route handlers.

For every API request, in GitHub's order: record it; let a scheduled fault answer, delay
or drop it (before anything happens, or with ``applied`` after the request was performed);
authenticate (JWT or installation token); count it against the primary rate
limit (403/429 when exhausted); check the secondary limits (in-flight requests, content
creation) for writes; run the handler; for a GET 200 attach a token-specific ETag (and
``Last-Modified`` for single resources) and answer 304 to a matching ``If-None-Match``
or ``If-Modified-Since``, refunding the rate limit. Paths under ``/_simulator/`` are the
test-control API (``control.py``) and bypass all of it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from . import (
    control,
    graphql_api,
    hook_log,
    routes_app,
    routes_checks,
    routes_comments,
    routes_contents,
    routes_pulls,
    routes_search,
    web_pages,
)
from .auth import verify_app_jwt, verify_installation_token
from .faults import (
    SECONDARY_LIMIT_DOCS,
    SECONDARY_LIMIT_MESSAGE,
    ConnectionDropped,
    DropKind,
    Fault,
)
from .limits import SEARCH, Bucket
from .openapi.checker import check as check_shape
from .records import RecordedRequest, capture_headers
from .rest import (
    API_VERSION,
    ApiError,
    dump_json,
    etag_for,
    etag_matches,
    http_date,
    not_found,
    parse_http_date,
)
from .routing import Ctx, Reply, Route, RouteTable
from .state import World

RATE_LIMIT_DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"


def build_routes() -> RouteTable:
    table = RouteTable()
    for module in (routes_app, routes_pulls, routes_comments, routes_checks, routes_contents,
                   hook_log, routes_search, graphql_api):
        table.extend(module.routes)
    return table


class SimulatorApp:
    """ASGI app serving ``world``; ``prefix`` mounts it like GHES's ``/api/v3`` (GraphQL
    then at ``/api/graphql``, as GHES serves it)."""

    def __init__(self, world: World, *, prefix: str = "") -> None:
        self.world = world
        self.prefix = prefix.rstrip("/")
        self.routes = build_routes()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            raise RuntimeError(f"unsupported ASGI scope {scope['type']!r}")
        request = Request(scope, receive)
        body = await request.body()
        path: str = scope["path"]
        if self.prefix:
            # GHES serves REST under /api/v3 and GraphQL beside it at /api/graphql; there
            # is no /api/v3/graphql.
            graphql = self.prefix.rpartition("/")[0] + "/graphql"
            if path == graphql:
                path = "/graphql"
            elif not path.startswith(self.prefix + "/") or path == self.prefix + "/graphql":
                await self._json(not_found().body(), 404)(scope, receive, send)
                return
            else:
                path = path[len(self.prefix):]
        if path.startswith("/_simulator/"):
            response = await control.handle(self.world, request.method, path, body)
            await response(scope, receive, send)
            return
        if web_pages.is_web_page(path):  # github.com's pages, not the API
            query = scope.get("query_string", b"").decode("latin-1")
            response = await web_pages.handle(self.world, request.method, path, query, body)
            await response(scope, receive, send)
            return
        headers, credential = capture_headers(scope["headers"])
        record = RecordedRequest(
            method=request.method, path=path, query=_query_lists(request),
            headers=headers, body=body, at=self.world.now(), monotonic=time.monotonic(),
            credential=credential)
        self.world.requests.append(record)
        fault = self.world.faults.take(request.method, path)
        if fault is not None:
            record.fault = fault.label
        if fault is None or (fault.is_slow_only and not fault.applied):
            # No fault, or slow but otherwise normal: sleep while "in flight".
            delay = fault.delay if fault is not None else 0.0
            response = await self._dispatch(request, path, body, delay)
        else:
            # With ``applied`` GitHub does the work; only the answer goes wrong.
            performed = await self._dispatch(request, path, body, 0.0) if fault.applied else None
            if fault.delay > 0:
                await anyio.sleep(fault.delay)
            if fault.drop is not None:
                await _drop(fault.drop, send)
                return
            if fault.status is not None:
                response = self._fault_response(fault)
            else:
                assert performed is not None  # applied and slow: the real answer, late
                response = performed
        record.status = response.status_code
        found = self.routes.match(request.method, path)
        if found is not None:
            record.route = found[0].template
        if (record.route is not None and record.fault is None
                and response.headers.get("content-type", "").startswith("application/json")):
            check_shape(request.method, record.route, response.status_code,
                        bytes(response.body))
        await response(scope, receive, send)

    # -- helpers ---------------------------------------------------------------------------
    def _common_headers(self) -> dict[str, str]:
        return {
            "date": http_date(self.world.now()),
            "server": "github.com",
            "x-github-api-version-selected": API_VERSION,
            "x-github-media-type": "github.v3; format=json",
            "x-github-request-id": uuid.uuid4().hex[:20].upper(),
            "vary": "Accept, Authorization, Cookie, X-GitHub-OTP, Accept-Encoding",
            "access-control-expose-headers": "ETag, Link, Location, Retry-After, "
            "X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, "
            "X-RateLimit-Resource, X-RateLimit-Reset",
        }

    def _json(self, body: Any, status: int, headers: dict[str, str] | None = None) -> Response:
        return Response(dump_json(body), status_code=status,
                        headers={**self._common_headers(), **(headers or {})},
                        media_type="application/json; charset=utf-8")

    def _fault_response(self, fault: Fault) -> Response:
        assert fault.status is not None
        body = fault.response_body()
        if isinstance(body, str):
            return Response(body, status_code=fault.status,
                            headers={**self._common_headers(), **fault.headers},
                            media_type="text/html; charset=utf-8")
        return self._json(body, fault.status, fault.headers)

    async def _dispatch(self, request: Request, path: str, body: bytes,
                        delay: float) -> Response:
        world = self.world
        found = self.routes.match(request.method, path)
        if found is None:
            if delay:
                await anyio.sleep(delay)
            return self._json(not_found().body(), 404)
        route, params = found
        headers = {k.lower(): v for k, v in request.headers.items()}
        ctx = Ctx(world=world, method=request.method, path=path, params=params,
                  query=dict(request.query_params), headers=headers, body=body,
                  base_url=str(request.base_url).rstrip("/") + self.prefix)
        bucket: Bucket | None = None
        key: str | None = None
        try:
            key = self._authenticate(route, ctx)
            bucket = self._count(route, ctx, key)
            reply = await self._run(route, ctx, key, delay)
        except ApiError as error:
            reply = Reply(status=error.status, body=error.body(), headers=error.headers)
        return self._respond(route, ctx, reply, key, bucket)

    def _authenticate(self, route: Route, ctx: Ctx) -> str | None:
        authorization = ctx.headers.get("authorization")
        if route.auth == "jwt":
            ctx.app = verify_app_jwt(self.world, authorization)
            return f"app:{ctx.app.id}"
        if route.auth == "token":
            ctx.token = verify_installation_token(self.world, authorization)
            return f"installation:{ctx.token.installation_id}"
        return None

    def _count(self, route: Route, ctx: Ctx, key: str | None) -> Bucket | None:
        if key is None:
            return None
        limiter, now = self.world.limiter, self.world.clock.timestamp()
        if route.resource == "search":
            key += SEARCH
        if not route.rate_limited:
            return limiter.bucket(key, now)
        bucket, allowed = limiter.consume(key, now)
        if not allowed:
            kind, _, ident = key.partition(":")
            raise ApiError(self.world.settings.primary_limit_status,
                           f"API rate limit exceeded for {kind} ID {ident}.",
                           headers=bucket.headers(), documentation_url=RATE_LIMIT_DOCS)
        return bucket

    async def _run(self, route: Route, ctx: Ctx, key: str | None, delay: float) -> Reply:
        limiter, settings = self.world.limiter, self.world.settings
        if key is not None and not limiter.enter(key):
            raise ApiError(settings.secondary_limit_status, SECONDARY_LIMIT_MESSAGE,
                           headers={"retry-after": "60"}, documentation_url=SECONDARY_LIMIT_DOCS)
        try:
            if delay:
                await anyio.sleep(delay)
            now = self.world.clock.timestamp()
            if route.creates_content and key is not None:
                wait = limiter.content_retry_after(key, now)
                if wait is not None:
                    raise ApiError(settings.secondary_limit_status, SECONDARY_LIMIT_MESSAGE,
                                   headers={"retry-after": str(wait)},
                                   documentation_url=SECONDARY_LIMIT_DOCS)
            reply = await route.handler(ctx)
            if route.creates_content and key is not None and reply.status < 400:
                limiter.record_creation(key, now)
            return reply
        finally:
            if key is not None:
                limiter.leave(key)

    def _respond(self, route: Route, ctx: Ctx, reply: Reply, key: str | None,
                 bucket: Bucket | None) -> Response:
        headers = self._common_headers()
        if bucket is not None:
            headers.update(bucket.headers())
        headers.update(reply.headers)
        if reply.status == 204:
            return Response(status_code=204, headers=headers)
        content = reply.text.encode() if reply.text is not None else dump_json(reply.body)
        if ctx.method == "GET" and reply.status == 200:
            etag = etag_for(ctx.headers.get("accept"), ctx.headers.get("authorization"), content)
            headers["etag"] = etag
            headers["cache-control"] = "private, max-age=60, s-maxage=60"
            if reply.last_modified is not None:
                headers["last-modified"] = http_date(reply.last_modified)
            if self._not_modified(ctx, etag, reply):
                if key is not None and route.rate_limited and bucket is not None:
                    self.world.limiter.refund(key + SEARCH if route.resource == "search"
                                              else key)
                    headers.update(bucket.headers())
                return Response(status_code=304, headers=headers)
        return Response(content, status_code=reply.status, headers=headers,
                        media_type=reply.content_type)

    @staticmethod
    def _not_modified(ctx: Ctx, etag: str, reply: Reply) -> bool:
        if_none_match = ctx.headers.get("if-none-match")
        if if_none_match is not None:  # it takes precedence over If-Modified-Since
            return etag_matches(if_none_match, etag)
        since = ctx.headers.get("if-modified-since")
        if since is None or reply.last_modified is None:
            return False
        parsed = parse_http_date(since)
        return parsed is not None and reply.last_modified.replace(microsecond=0) <= parsed


def _query_lists(request: Request) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in request.query_params.multi_items():
        out.setdefault(key, []).append(value)
    return out


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _drop(kind: DropKind, send: Send) -> None:
    """Close the connection without a response.

    Under uvicorn the ``send`` callable is bound to the connection's request cycle, which
    holds the socket's transport: closing it makes the client see the peer hang up (a FIN
    for ``remote_protocol``, a RST for ``read_error``). Anywhere else (the in-process
    ``ASGITransport``) raise ``ConnectionDropped`` for ``SimulatorTransport`` to translate.
    """
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if not isinstance(transport, asyncio.BaseTransport):
        raise ConnectionDropped(kind)
    if kind == "read_error":
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.close()
    for _ in range(50):  # let uvicorn notice, so it does not log a missing response
        if getattr(cycle, "disconnected", True):
            break
        await asyncio.sleep(0.01)
