"""The one GitHub REST client: authenticated per installation, patient, and polite.

Every GitHub call the service makes goes through ``GitHubClient``. It owns a single
``httpx.AsyncClient`` (transport injectable, so tests use ``httpx.MockTransport`` or the
simulator's ASGI app); its ``Requester`` (``requester``) applies the pure rules of
``ratelimit``, ``urls`` and ``conditional`` to every attempt. Together they provide:

- the headers GitHub asks for (``Accept``, ``X-GitHub-Api-Version``, ``User-Agent``) and
  the credential of the *actor*: an installation id (its token, from the token source)
  or ``APP`` (the App JWT);
- conditional GETs through an ``ETagCache``, keyed per token (see ``conditional``);
- rate limits: ``x-ratelimit-*`` remembered per actor and resource, a pre-emptive wait
  when a budget is known to be spent, and GitHub's wait rules on 403/429;
- bounded, jittered retries of 5xx and connection errors (a ``POST`` only when it is
  known not to have reached GitHub, unless the caller says it is idempotent);
- writes serialised per installation and spaced at least a second apart;
- nothing secret written: every string in a write's JSON body passes the ``Redactor``
  (credential shapes, and the service's own key and secrets) before it leaves, and a
  redaction is logged by kind, never by value (``service.config.redact``);
- typed errors (``errors``) instead of status codes.

Time, sleep and randomness are parameters, so tests run without waiting and assert the
waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Final

import httpx

from service import __version__
from service.config.connections import GitHubConfig
from service.config.redact import Redactor
from service.github.actors import Actor, Clock
from service.github.auth import AppJWT, InstallationTokens
from service.github.conditional import Conditional, ConditionalResult, ConditionalStats
from service.github.errors import GitHubError
from service.github.installations import mint_installation_token
from service.github.ratelimit import RateLimit, RetryPolicy
from service.github.requester import Params, Requester, Sleep, TokenSource
from service.github.urls import normalize_api_base, parse_link_header
from service.model.etags import ETagCache

__all__ = ["API_VERSION", "DIFF_MEDIA", "JSON_MEDIA", "USER_AGENT", "GitHubClient", "TokenSource"]

JSON_MEDIA: Final = "application/vnd.github+json"
DIFF_MEDIA: Final = "application/vnd.github.diff"
API_VERSION: Final = "2022-11-28"
USER_AGENT: Final = f"pr-review-agent/{__version__}"
# PATCH counts as idempotent here: GitHub's PATCHes set fields (edit a comment's body),
# so repeating one yields the same state. POST creates things and does not.
IDEMPOTENT_METHODS: Final = frozenset({"GET", "HEAD", "PUT", "DELETE", "PATCH"})
#: The methods whose JSON body is text the App publishes, and so is redacted.
_WRITES: Final = frozenset({"POST", "PATCH", "PUT"})
log = logging.getLogger(__name__)
DEFAULT_TIMEOUT: Final = httpx.Timeout(30.0, connect=10.0)


def _json_body(response: httpx.Response, method: str, path: str) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        raise GitHubError(
            "response body is not JSON", status=response.status_code, method=method, path=path
        ) from None


class GitHubClient:
    """A rate-limit-aware GitHub REST client. Use ``async with`` or call ``aclose()``.

    ``actor`` is the first argument of every call: an installation id, or ``APP`` for the
    App's own routes (``/app/...``, ``/repos/{o}/{r}/installation``).
    """

    def __init__(
        self,
        api_url: str,
        *,
        app_jwt: Callable[[], str],
        clock: Clock,
        tokens: TokenSource | None = None,
        etags: ETagCache | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        policy: RetryPolicy | None = None,
        user_agent: str = USER_AGENT,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        redactor: Redactor | None = None,
        on_rate_limit: Callable[[Actor, RateLimit], None] | None = None,
    ) -> None:
        """``on_rate_limit`` hears every ``x-ratelimit-*`` reading as it arrives (the
        process's metrics)."""
        self._base = normalize_api_base(api_url)
        self._redactor = redactor or Redactor()
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=timeout,
            follow_redirects=True,  # GitHub answers renamed repositories with 301/307.
            headers={
                "Accept": JSON_MEDIA,
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": user_agent,
            },
        )
        if tokens is None:
            tokens = InstallationTokens(
                lambda installation_id: mint_installation_token(self, installation_id), clock
            )
        self.tokens: TokenSource = tokens
        self._etags = etags
        self._requester = Requester(
            self._http,
            self._base,
            app_jwt=app_jwt,
            tokens=self.tokens,
            clock=clock,
            sleep=sleep,
            rand=rand,
            policy=policy or RetryPolicy(),
            etags=etags,
            on_rate_limit=on_rate_limit,
        )

    @classmethod
    def from_config(
        cls,
        config: GitHubConfig,
        *,
        clock: Clock,
        etags: ETagCache | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        policy: RetryPolicy | None = None,
        redactor: Redactor | None = None,
    ) -> GitHubClient:
        """The production wiring: App JWT from the configured key, tokens minted on demand."""
        return cls(
            config.api_url,
            app_jwt=AppJWT(config.app_id, config.private_key, clock),
            clock=clock,
            etags=etags,
            transport=transport,
            sleep=sleep,
            policy=policy,
            redactor=redactor,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> GitHubClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"GitHubClient({self._base!r})"

    # ------------------------------------------------------------------ observation

    @property
    def api_url(self) -> str:
        return self._base

    @property
    def conditional_stats(self) -> ConditionalStats:
        """A snapshot of the conditional-request counters (see ``ConditionalStats``)."""
        return self._requester.stats.snapshot()

    def rate_limit(self, actor: Actor, resource: str = "core") -> RateLimit | None:
        """The last ``x-ratelimit-*`` reading for ``actor`` and ``resource``, if any."""
        return self._requester.rate_limit(actor, resource)

    async def installation_token(self, installation_id: int) -> str:
        """The current token of an installation, for ``git clone`` over HTTPS. Never log it."""
        return await self.tokens.token(installation_id)

    # ------------------------------------------------------------------ convenience

    async def get_json(self, actor: Actor, path: str, params: Params | None = None) -> Any:
        """GET and parse JSON."""
        response = await self.request(actor, "GET", path, params=params)
        return _json_body(response, "GET", self._requester.path_of(path))

    async def get_text(
        self, actor: Actor, path: str, params: Params | None = None, *, accept: str = DIFF_MEDIA
    ) -> str:
        """GET a text media type, e.g. a pull request as ``application/vnd.github.diff``.

        A diff over GitHub's limits raises ``NotAcceptable`` with ``too_large`` set.
        """
        response = await self.request(actor, "GET", path, params=params, accept=accept)
        return response.text

    async def post_json(
        self, actor: Actor, path: str, json: Any = None, *, idempotent: bool = False,
        urgent: bool = False,
    ) -> Any:
        """POST. Retried after a 5xx or read failure only when ``idempotent`` is True,
        because a POST that GitHub may have applied would otherwise be applied twice.
        ``urgent`` (the 👀): ahead of the installation's other writes waiting."""
        response = await self.request(actor, "POST", path, json=json, idempotent=idempotent,
                                      urgent=urgent)
        return _json_body(response, "POST", self._requester.path_of(path))

    async def patch_json(self, actor: Actor, path: str, json: Any = None) -> Any:
        response = await self.request(actor, "PATCH", path, json=json)
        return _json_body(response, "PATCH", self._requester.path_of(path))

    async def put_json(self, actor: Actor, path: str, json: Any = None) -> Any:
        response = await self.request(actor, "PUT", path, json=json)
        return _json_body(response, "PUT", self._requester.path_of(path))

    async def delete(self, actor: Actor, path: str) -> None:
        await self.request(actor, "DELETE", path)

    async def paginate(
        self,
        actor: Actor,
        path: str,
        params: Params | None = None,
        *,
        items_key: str | None = None,
        max_pages: int | None = None,
    ) -> AsyncIterator[Any]:
        """Yield every item of a listing, following ``Link: rel="next"``.

        ``per_page`` defaults to 100 (GitHub's maximum). ``items_key`` names the list in
        endpoints that wrap it (``/installation/repositories`` → ``"repositories"``).
        Pagination stops at ``max_pages``, or if GitHub ever links back to a page seen.
        """
        query: dict[str, str | int | bool] = {"per_page": 100, **(params or {})}
        url: str | None = path
        seen: set[str] = set()
        pages = 0
        while url is not None:
            response = await self.request(actor, "GET", url, params=query)
            data = _json_body(response, "GET", self._requester.path_of(url))
            items = data.get(items_key) if items_key and isinstance(data, Mapping) else data
            if not isinstance(items, list):
                where = self._requester.path_of(url)
                raise GitHubError("paginated response is not a list", method="GET", path=where)
            for item in items:
                yield item
            pages += 1
            seen.add(str(response.request.url))
            nxt = parse_link_header(response.headers.get("link")).get("next")
            if nxt is None or nxt in seen or (max_pages is not None and pages >= max_pages):
                return
            url, query = nxt, {}  # the next link already carries the whole query

    @property
    def conditional(self) -> bool:
        """Whether this client keeps validators (``get_conditional`` needs them)."""
        return self._etags is not None

    async def get_conditional(
        self, installation_id: int, path: str, params: Params | None = None
    ) -> ConditionalResult:
        """A conditional GET: ``not_modified=True`` when GitHub answers 304.

        Sends the validators stored for *this token* only; stores the new ones on 200.
        """
        if self._etags is None:
            raise RuntimeError("get_conditional needs the client to be given an ETagCache")
        cond = Conditional()
        response = await self._requester.send(
            installation_id, "GET", path, params=params, accept=JSON_MEDIA, idempotent=True,
            conditional=cond,
        )
        links = parse_link_header(response.headers.get("link"))
        etag = response.headers.get("etag")
        last_modified = response.headers.get("last-modified")
        if response.status_code == 304:
            return ConditionalResult(
                status=304, not_modified=True, links=links, etag=etag, last_modified=last_modified
            )
        return ConditionalResult(
            status=response.status_code,
            not_modified=False,
            data=_json_body(response, "GET", self._requester.path_of(path)),
            links=links,
            etag=etag,
            last_modified=last_modified,
        )

    async def request(
        self,
        actor: Actor,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: Any = None,
        accept: str = JSON_MEDIA,
        idempotent: bool | None = None,
        urgent: bool = False,
    ) -> httpx.Response:
        """One REST call with every rule above applied; returns the successful response.

        ``path`` is ``/resource/...`` under the API base, or a URL from a ``Link`` header.
        ``idempotent`` defaults by method (everything but POST).
        """
        method = method.upper()
        if json is not None and method in _WRITES:
            json, removed = self._redactor.payload(json)
            if removed:
                log.warning("redacted %d credential(s) from a %s before sending it",
                            len(removed), method,
                            extra={"path": self._requester.path_of(path),
                                   "kinds": sorted(set(removed))})
        return await self._requester.send(
            actor, method, path, params=params, json=json, accept=accept,
            idempotent=method in IDEMPOTENT_METHODS if idempotent is None else idempotent,
            urgent=urgent,
        )

