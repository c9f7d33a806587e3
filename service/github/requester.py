"""The request engine under ``GitHubClient``: one call, many careful attempts.

``Requester.send`` turns one logical request into as many HTTP attempts as GitHub's rules
allow, applying the pure decisions of ``ratelimit`` and ``conditional``:

- it asks for a fresh credential on every attempt (a long wait may outlive a token);
- it waits, before sending, when the actor's budget for the resource is known to be spent;
- it serialises writes per installation and spaces them ``write_spacing`` apart, an
  ``urgent`` one (the 👀) ahead of the others and not held back by the spacing
  (``write_turns``);
- it attaches the validators stored for the token in use to a conditional GET, and counts
  whether their absence is a first request or the cost of a token rotation;
- on a 401 it drops the installation token and tries once with a new one; on a rate limit
  it waits as GitHub says; on 5xx or a dropped connection it backs off with jitter; and
  otherwise it raises the typed error;
- it measures limit resets and HTTP-date ``Retry-After`` on GitHub's clock (from ``Date``,
  see ``github_clock``), so a skewed host clock neither wakes early nor oversleeps.

Credentials exist only in the per-attempt header dict handed to httpx; logs carry the
installation id, method, API path, status and attempt, never a header.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import httpx

from service.github.actors import APP, Actor, Clock
from service.github.conditional import (
    Conditional,
    ConditionalStats,
    Validating,
)
from service.github.errors import RateLimited, ServerError, error_for_status
from service.github.github_clock import GitHubClock
from service.github.ratelimit import (
    RateLimit,
    RetryPolicy,
    backoff_delay,
    classify_rate_limit,
    parse_rate_limit,
    parse_retry_after,
    rate_limit_wait,
    resource_for_path,
)
from service.github.urls import GRAPHQL_PATH, api_url, graphql_url
from service.github.write_turns import WriteTurns
from service.model.etags import ETagCache

log = logging.getLogger(__name__)

WRITE_METHODS: Final = frozenset({"POST", "PATCH", "PUT", "DELETE"})

Sleep = Callable[[float], Awaitable[None]]
Params = Mapping[str, str | int | bool]


class TokenSource(Protocol):
    """Where installation tokens come from (``auth.InstallationTokens`` in production)."""

    async def token(self, installation_id: int) -> str: ...

    def invalidate(self, installation_id: int, token: str) -> None: ...


@dataclass
class _Budget:
    """What one logical request has used of its retry allowances."""

    rate_limit_waits: int = 0
    server_retries: int = 0
    refreshed_token: bool = False
    attempt: int = 0


@dataclass(frozen=True)
class _Call:
    """One logical request, fixed across its attempts."""

    actor: Actor
    method: str
    url: str
    path: str  # API-relative, no query: what logs and errors show
    resource: str
    json: Any
    accept: str
    idempotent: bool
    conditional: Conditional | None
    write: bool
    urgent: bool = False


def _never_reached_github(exc: httpx.TransportError) -> bool:
    # These fail before a byte of the request is on the wire: safe to retry any method.
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def _retryable_transport(exc: httpx.TransportError) -> bool:
    return isinstance(exc, httpx.TimeoutException | httpx.NetworkError | httpx.RemoteProtocolError)


def _error_fields(response: httpx.Response) -> tuple[str, list[Any], str | None]:
    """GitHub's ``message``, ``errors`` and ``documentation_url`` from an error body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, Mapping):
        message = body.get("message")
        errors = body.get("errors")
        doc = body.get("documentation_url")
        return (
            message if isinstance(message, str) and message else response.reason_phrase,
            list(errors) if isinstance(errors, list) else [],
            doc if isinstance(doc, str) else None,
        )
    return response.reason_phrase or f"HTTP {response.status_code}", [], None


class Requester:
    """Sends requests for ``GitHubClient`` with retries, limits, spacing and validators."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base: str,
        *,
        app_jwt: Callable[[], str],
        tokens: TokenSource,
        clock: Clock,
        sleep: Sleep,
        rand: Callable[[], float],
        policy: RetryPolicy,
        etags: ETagCache | None,
        on_rate_limit: Callable[[Actor, RateLimit], None] | None = None,
    ) -> None:
        self._http = http
        self._on_rate_limit = on_rate_limit
        self._base = base
        self._base_path = urlsplit(base).path
        self._app_jwt = app_jwt
        self.tokens = tokens
        self._clock = clock
        self._sleep = sleep
        self._rand = rand
        self._policy = policy
        self._limits: dict[tuple[Actor, str], RateLimit] = {}
        self._write_turns: dict[Actor, WriteTurns] = {}
        self._last_write: dict[Actor, datetime] = {}
        self._github_clock = GitHubClock(self._now)  # for GitHub's instants (resets)
        self._validators = Validating(etags) if etags is not None else None
        self.stats = self._validators.stats if self._validators else ConditionalStats()

    def rate_limit(self, actor: Actor, resource: str) -> RateLimit | None:
        return self._limits.get((actor, resource))

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError("the client's clock returned a naive datetime")
        return now

    def path_of(self, path_or_url: str) -> str:
        """The API-relative path (no query) of a path or same-origin URL, for errors/logs."""
        path = urlsplit(path_or_url).path
        if self._base_path and path.startswith(self._base_path + "/"):
            return path[len(self._base_path):]
        return path

    async def send(
        self,
        actor: Actor,
        method: str,
        path: str,
        *,
        params: Params | None,
        accept: str,
        idempotent: bool,
        json: Any = None,
        conditional: Conditional | None = None,
        urgent: bool = False,
    ) -> httpx.Response:
        if isinstance(actor, str):
            valid = actor == APP
        else:
            valid = not isinstance(actor, bool) and actor > 0
        if not valid:
            raise ValueError("actor must be a positive installation id or APP")
        # GraphQL's one endpoint is not always under the REST base (GHES: /api/graphql
        # beside /api/v3); it is the one URL outside it a credential may go to.
        url = graphql_url(self._base) if path == GRAPHQL_PATH else api_url(self._base, path)
        if params:
            url = str(httpx.URL(url).copy_merge_params(dict(params)))
        api_path = GRAPHQL_PATH if path == GRAPHQL_PATH else self.path_of(url)
        call = _Call(
            actor=actor, method=method, url=url, path=api_path,
            resource=resource_for_path(api_path), json=json, accept=accept,
            idempotent=idempotent, conditional=conditional,
            # Writes made as an installation create content: one at a time, spaced. App
            # POSTs (token mints) do not, and must not queue behind a review being posted.
            write=method in WRITE_METHODS and not isinstance(actor, str), urgent=urgent,
        )
        if not call.write:
            return await self._attempts(call)
        async with self._write_turns.setdefault(actor, WriteTurns()).turn(urgent=urgent):
            return await self._attempts(call)

    async def _attempts(self, call: _Call) -> httpx.Response:
        budget = _Budget()
        while True:
            budget.attempt += 1
            await self._respect_known_limit(call)
            header, token = await self._credential(call.actor)
            headers = {"Authorization": header, "Accept": call.accept}
            if call.conditional is not None and token is not None:
                assert self._validators is not None
                assert not isinstance(call.actor, str)
                self._validators.add(call.conditional, call.actor, accept=call.accept,
                                     url=call.url, token=token, headers=headers)
            if call.write and not call.urgent:
                await self._space_write(call.actor)
            try:
                response = await self._http.request(
                    call.method, call.url, json=call.json, headers=headers
                )
            except httpx.TransportError as exc:
                if call.write:
                    self._last_write[call.actor] = self._now()
                await self._after_transport_error(call, budget, exc)
                continue
            if call.write:
                self._last_write[call.actor] = self._now()
            self._github_clock.observe(response.headers)
            self._record_rate_limit(call.actor, response.headers)
            status = response.status_code
            log.debug("github response", extra={**self._log_extra(call, budget),
                                                "http_status": status})
            if 200 <= status < 300 or (status == 304 and call.conditional is not None):
                if call.conditional is not None and token is not None:
                    assert self._validators is not None
                    self._validators.settle(call.conditional, response,
                                            self.path_of(str(response.request.url)))
                return response
            await self._after_error_response(call, budget, response, token)

    @staticmethod
    def _log_extra(call: _Call, budget: _Budget) -> dict[str, Any]:
        return {"installation_id": call.actor, "http_method": call.method,
                "url_path": call.path, "attempt": budget.attempt}

    async def _after_transport_error(
        self, call: _Call, budget: _Budget, exc: httpx.TransportError
    ) -> None:
        """Sleep before the next attempt, or raise ``ServerError`` when out of retries."""
        extra = {**self._log_extra(call, budget), "error": type(exc).__name__}
        retryable = _never_reached_github(exc) or (call.idempotent and _retryable_transport(exc))
        if not retryable or budget.server_retries >= self._policy.server_retries:
            log.warning("github connection failed", extra=extra)
            raise ServerError(
                f"connection failed ({type(exc).__name__})", method=call.method, path=call.path
            ) from None
        delay = backoff_delay(budget.server_retries, self._policy, self._rand)
        budget.server_retries += 1
        log.info("retrying after connection error", extra={**extra, "wait_seconds": delay})
        await self._sleep(delay)

    async def _after_error_response(
        self, call: _Call, budget: _Budget, response: httpx.Response, token: str | None
    ) -> None:
        """Decide what a failed response means: retry (after sleeping) or raise."""
        status = response.status_code
        extra = {**self._log_extra(call, budget), "http_status": status}
        message, errors, doc = _error_fields(response)
        context: dict[str, Any] = {
            "method": call.method, "path": call.path, "errors": errors,
            "documentation_url": doc, "request_id": response.headers.get("x-github-request-id"),
        }
        if (status == 401 and not isinstance(call.actor, str) and token is not None
                and not budget.refreshed_token):
            # A revoked or prematurely expired token: drop it and try once with a new one.
            budget.refreshed_token = True
            self.tokens.invalidate(call.actor, token)
            log.info("token refused; minting a fresh one", extra=extra)
            return
        now = self._now()
        github_now = self._github_clock.at(now)  # resets and HTTP dates are GitHub's instants
        kind = classify_rate_limit(status, response.headers, message)
        if kind is not None:
            wait = rate_limit_wait(response.headers, github_now, budget.rate_limit_waits)
            until = now + timedelta(seconds=wait)  # when to retry, on our clock
            if (budget.rate_limit_waits >= self._policy.rate_limit_retries
                    or wait > self._policy.max_wait.total_seconds()):
                limit = parse_rate_limit(response.headers)
                log.warning("github rate limit: giving up",
                            extra={**extra, "limit_kind": kind, "until": until.isoformat()})
                raise RateLimited(message, until=until, kind=kind, status=status,
                                  resource=limit.resource if limit else None, **context)
            budget.rate_limit_waits += 1
            log.warning("github rate limit: waiting",
                        extra={**extra, "limit_kind": kind, "wait_seconds": wait})
            await self._sleep(wait)
            return
        retry_after = parse_retry_after(response.headers.get("retry-after"), github_now)
        patient = retry_after is None or retry_after <= self._policy.max_wait.total_seconds()
        retries_left = budget.server_retries < self._policy.server_retries
        if status >= 500 and call.idempotent and retries_left and patient:
            delay = backoff_delay(budget.server_retries, self._policy, self._rand)
            delay = max(delay, retry_after or 0.0)  # a 503's Retry-After is a floor
            budget.server_retries += 1
            log.info("retrying after server error", extra={**extra, "wait_seconds": delay})
            await self._sleep(delay)
            return
        if status == 404:
            # Often an answer the caller expects (no such file, no such comment): it is
            # raised as NotFound, and whoever did not expect it says so. Not a failure to
            # log here.
            log.debug("github answered 404 (not found)", extra=extra)
        else:
            log.info("github request failed", extra=extra)
        raise error_for_status(
            status, message,
            accepted_permissions=response.headers.get("x-accepted-github-permissions"),
            **context,
        )

    async def _credential(self, actor: Actor) -> tuple[str, str | None]:
        """The Authorization header value, and the installation token it carries (if any)."""
        if isinstance(actor, str):  # APP
            return f"Bearer {self._app_jwt()}", None
        token = await self.tokens.token(actor)
        return f"Bearer {token}", token

    async def _respect_known_limit(self, call: _Call) -> None:
        """Do not spend a request GitHub has already said it will refuse."""
        known = self._limits.get((call.actor, call.resource))
        if known is None or known.remaining > 0:
            return
        now = self._now()
        # The reset is an instant on GitHub's clock: measure it there.
        wait = (known.reset - self._github_clock.at(now)).total_seconds()
        if wait <= 0:
            return
        if wait > self._policy.max_wait.total_seconds():
            raise RateLimited(
                f"{call.resource} rate limit spent until reset",
                until=now + timedelta(seconds=wait),
                kind="primary", resource=call.resource, method=call.method, path=call.path,
            )
        log.warning("github rate limit spent: waiting for reset",
                    extra={"installation_id": call.actor, "url_path": call.path,
                           "wait_seconds": wait})
        await self._sleep(wait)

    async def _space_write(self, actor: Actor) -> None:
        last = self._last_write.get(actor)
        if last is None:
            return
        wait = (last + self._policy.write_spacing - self._now()).total_seconds()
        if wait > 0:
            await self._sleep(wait)

    def _record_rate_limit(self, actor: Actor, headers: httpx.Headers) -> None:
        limit = parse_rate_limit(headers)
        if limit is not None:
            self._limits[(actor, limit.resource)] = limit
            if self._on_rate_limit is not None:
                self._on_rate_limit(actor, limit)
