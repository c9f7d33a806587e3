"""App authentication: JWT claims, installation tokens, installation discovery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from service.config.schema import GitHubConfig
from service.config.secret import Secret
from service.github.actors import APP
from service.github.auth import (
    AppJWT,
    AppKeyError,
    InstallationToken,
    InstallationTokens,
    make_app_jwt,
    parse_token_response,
)
from service.github.client import GitHubClient
from service.github.errors import GitHubError, NotFound, Unauthorized
from service.github.installations import (
    find_repository_installation,
    list_installation_repositories,
    list_installations,
)
from tests.github.client_kit import T0, FakeClock, FakeSleep

APP_ID = 4242
BASE = "https://api.github.com"
# The 2026 token format: ~520 characters, dots included. Nothing may assume 40 chars.
LONG_TOKEN = "ghs_4242_" + "eyJ" + "a" * 200 + "." + "b" * 200 + "." + "c" * 100


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def pem(rsa_key: rsa.RSAPrivateKey) -> str:
    return rsa_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _claims(token: str, rsa_key: rsa.RSAPrivateKey) -> dict[str, Any]:
    # Signature checked against the public key; times checked by the tests themselves.
    return jwt.decode(
        token,
        rsa_key.public_key(),
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    )


# ---------------------------------------------------------------- the App JWT


def test_jwt_claims_and_signature(pem: str, rsa_key: rsa.RSAPrivateKey) -> None:
    token = make_app_jwt(APP_ID, pem, T0)
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = _claims(token, rsa_key)
    assert claims == {
        "iat": int(T0.timestamp()) - 60,
        "exp": int(T0.timestamp()) + 9 * 60,
        "iss": str(APP_ID),
    }


def test_jwt_verification_fails_with_another_key(pem: str) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(jwt.InvalidSignatureError):
        _claims(make_app_jwt(APP_ID, pem, T0), other)


@pytest.mark.parametrize("fast_by", [0, 30, 59])
def test_a_fast_clock_keeps_exp_under_githubs_ten_minutes(
    pem: str, rsa_key: rsa.RSAPrivateKey, fast_by: int
) -> None:
    github_now = T0
    host_now = T0 + timedelta(seconds=fast_by)
    claims = _claims(make_app_jwt(APP_ID, pem, host_now), rsa_key)
    assert claims["exp"] < int(github_now.timestamp()) + 600
    assert claims["iat"] <= int(github_now.timestamp())  # never "issued in the future"


def test_jwt_rejects_naive_time_and_bad_app_id(pem: str) -> None:
    with pytest.raises(ValueError, match="naive"):
        make_app_jwt(APP_ID, pem, datetime(2026, 1, 1))
    with pytest.raises(ValueError):
        make_app_jwt(0, pem, T0)
    with pytest.raises(ValueError):
        make_app_jwt(True, pem, T0)


def test_bad_keys_raise_without_revealing_the_key() -> None:
    garbage = "-----BEGIN PRIVATE KEY-----\nTOTALLYNOTAKEYbutSECRETISH\n-----END PRIVATE KEY-----\n"
    with pytest.raises(AppKeyError) as err:
        make_app_jwt(APP_ID, garbage, T0)
    assert "TOTALLYNOTAKEY" not in str(err.value)
    assert err.value.__cause__ is None
    assert err.value.__suppress_context__
    ec_pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    with pytest.raises(AppKeyError, match="RSA"):
        make_app_jwt(APP_ID, ec_pem, T0)


def test_app_jwt_is_reused_then_resigned(pem: str, rsa_key: rsa.RSAPrivateKey) -> None:
    clock = FakeClock()
    signer = AppJWT(APP_ID, Secret(pem), clock)
    first = signer()
    clock.now += timedelta(minutes=4, seconds=59)
    assert signer() == first
    clock.now += timedelta(seconds=1)
    second = signer()
    assert second != first
    assert _claims(second, rsa_key)["iat"] == int(clock.now.timestamp()) - 60
    assert "PRIVATE" not in repr(signer)
    assert str(APP_ID) in repr(signer)


# ---------------------------------------------------------------- installation tokens


def _token(installation_id: int, value: str, expires_at: datetime) -> InstallationToken:
    return InstallationToken(installation_id=installation_id, token=value, expires_at=expires_at)


class CountingMint:
    def __init__(self, clock: FakeClock, *, lifetime: timedelta = timedelta(hours=1)) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self.calls: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}

    async def __call__(self, installation_id: int) -> InstallationToken:
        self.calls.append(installation_id)
        gate = self.gates.get(installation_id)
        if gate is not None:
            await gate.wait()
        for _ in range(5):  # yield repeatedly: give other callers every chance to race
            await asyncio.sleep(0)
        n = len(self.calls)
        return _token(installation_id, f"tok-{installation_id}-{n}", self.clock() + self.lifetime)


@pytest.mark.anyio
async def test_tokens_are_cached_per_installation() -> None:
    clock = FakeClock()
    mint = CountingMint(clock)
    tokens = InstallationTokens(mint, clock)
    a1 = await tokens.token(1)
    assert await tokens.token(1) == a1
    b1 = await tokens.token(2)
    assert b1 != a1
    assert mint.calls == [1, 2]
    assert tokens.mints == 2
    assert tokens.last_mint_at == T0


@pytest.mark.anyio
async def test_tokens_refresh_five_minutes_before_expiry() -> None:
    clock = FakeClock()
    mint = CountingMint(clock)
    tokens = InstallationTokens(mint, clock)
    first = await tokens.token(1)
    clock.now = T0 + timedelta(minutes=54, seconds=59)
    assert await tokens.token(1) == first
    clock.now = T0 + timedelta(minutes=55)
    second = await tokens.token(1)
    assert second != first
    assert mint.calls == [1, 1]


@pytest.mark.anyio
async def test_many_concurrent_callers_cause_exactly_one_mint() -> None:
    clock = FakeClock()
    mint = CountingMint(clock)
    tokens = InstallationTokens(mint, clock)
    results = await asyncio.gather(*(tokens.token(7) for _ in range(50)))
    assert mint.calls == [7]
    assert set(results) == {"tok-7-1"}


@pytest.mark.anyio
async def test_one_slow_mint_does_not_block_another_installation() -> None:
    clock = FakeClock()
    mint = CountingMint(clock)
    mint.gates[1] = asyncio.Event()
    tokens = InstallationTokens(mint, clock)
    slow = asyncio.ensure_future(tokens.token(1))
    await asyncio.sleep(0)
    fast = await asyncio.wait_for(tokens.token(2), timeout=5)  # would hang if serialised
    assert fast.startswith("tok-2-")
    assert not slow.done()
    mint.gates[1].set()
    assert (await slow).startswith("tok-1-")


@pytest.mark.anyio
async def test_invalidate_only_drops_the_refused_token() -> None:
    clock = FakeClock()
    tokens = InstallationTokens(CountingMint(clock), clock)
    current = await tokens.token(1)
    tokens.invalidate(1, "some-older-token")
    assert await tokens.token(1) == current
    tokens.invalidate(1, current)
    assert await tokens.token(1) != current


def test_refresh_margin_must_be_at_least_five_minutes() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        InstallationTokens(CountingMint(clock), clock, refresh_margin=timedelta(minutes=4))


def test_token_repr_hides_the_token() -> None:
    record = _token(1, LONG_TOKEN, T0)
    assert LONG_TOKEN not in repr(record)


def test_parse_token_response_is_format_agnostic_and_strict_on_shape() -> None:
    parsed = parse_token_response(
        3,
        {
            "token": LONG_TOKEN,
            "expires_at": "2026-03-01T13:00:00Z",
            "permissions": {"pull_requests": "write"},
            "repository_selection": "selected",
        },
    )
    assert parsed.token == LONG_TOKEN
    assert len(parsed.token) > 500
    assert parsed.expires_at == T0 + timedelta(hours=1)
    assert parsed.permissions == {"pull_requests": "write"}
    bad: object
    for bad in (
        [],
        {"expires_at": "2026-03-01T13:00:00Z"},
        {"token": "", "expires_at": "2026-03-01T13:00:00Z"},
        {"token": "t"},
        {"token": "t", "expires_at": "tomorrow"},
        {"token": "t", "expires_at": "2026-03-01T13:00:00"},
    ):
        with pytest.raises(GitHubError):
            parse_token_response(3, bad)


# ---------------------------------------------------------------- through the client


Handler = Callable[[httpx.Request], httpx.Response]


class FakeGitHub:
    """A MockTransport handler that mints tokens and answers a few App routes."""

    def __init__(self, rsa_key: rsa.RSAPrivateKey, clock: FakeClock) -> None:
        self.rsa_key = rsa_key
        self.clock = clock
        self.requests: list[httpx.Request] = []
        self.minted: list[str] = []
        self.refuse_tokens: set[str] = set()
        self.routes: dict[tuple[str, str], Handler] = {}

    def _jwt_ok(self, request: httpx.Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme != "Bearer":
            return False
        try:
            claims = _claims(value, self.rsa_key)
        except jwt.PyJWTError:
            return False
        now = int(self.clock().timestamp())
        fresh = claims["iat"] <= now < claims["exp"] < now + 600
        return bool(claims["iss"] == str(APP_ID) and fresh)

    def _token_ok(self, request: httpx.Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return scheme == "Bearer" and value in self.minted and value not in self.refuse_tokens

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        await asyncio.sleep(0)
        path = request.url.path.removeprefix("/api/v3")
        if path.startswith("/app/installations/") and path.endswith("/access_tokens"):
            if request.method != "POST" or not self._jwt_ok(request):
                message = "A JSON web token could not be decoded"
                return httpx.Response(401, json={"message": message})
            token = f"{LONG_TOKEN}-{len(self.minted)}"
            self.minted.append(token)
            expires = (self.clock() + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            return httpx.Response(201, json={"token": token, "expires_at": expires})
        handler = self.routes.get((request.method, path))
        if handler is None:
            return httpx.Response(404, json={"message": "Not Found"})
        return handler(request)


def _client(
    github: FakeGitHub, pem: str, clock: FakeClock, api_url: str = "https://api.github.com"
) -> GitHubClient:
    config = GitHubConfig(
        app_id=APP_ID, private_key=Secret(pem), webhook_secrets=(Secret("w"),), api_url=api_url
    )
    return GitHubClient.from_config(
        config, clock=clock, transport=httpx.MockTransport(github), sleep=FakeSleep(clock)
    )


@pytest.mark.anyio
async def test_client_mints_with_the_jwt_and_uses_the_token(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def pulls(request: httpx.Request) -> httpx.Response:
        if not github._token_ok(request):
            return httpx.Response(401, json={"message": "Bad credentials"})
        return httpx.Response(200, json=[{"number": 1}])

    github.routes[("GET", "/repos/o/r/pulls")] = pulls
    async with _client(github, pem, clock) as client:
        results = await asyncio.gather(
            *(client.get_json(99, "/repos/o/r/pulls") for _ in range(20))
        )
    assert results == [[{"number": 1}]] * 20
    mints = [r for r in github.requests if r.url.path.endswith("/access_tokens")]
    assert len(mints) == 1
    assert mints[0].url == "https://api.github.com/app/installations/99/access_tokens"
    assert len(github.requests) == 21


@pytest.mark.anyio
async def test_ghes_base_url_keeps_its_api_v3_prefix(rsa_key: rsa.RSAPrivateKey, pem: str) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)
    github.routes[("GET", "/repos/o/r")] = lambda r: httpx.Response(200, json={"id": 5})
    async with _client(github, pem, clock, "https://ghe.example.com/api/v3/") as client:
        assert await client.get_json(3, "/repos/o/r") == {"id": 5}
    assert [str(r.url) for r in github.requests] == [
        "https://ghe.example.com/api/v3/app/installations/3/access_tokens",
        "https://ghe.example.com/api/v3/repos/o/r",
    ]


@pytest.mark.anyio
async def test_a_refused_token_is_replaced_once(rsa_key: rsa.RSAPrivateKey, pem: str) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def repo(request: httpx.Request) -> httpx.Response:
        if not github._token_ok(request):
            return httpx.Response(401, json={"message": "Bad credentials"})
        return httpx.Response(200, json={"ok": True})

    github.routes[("GET", "/repos/o/r")] = repo
    async with _client(github, pem, clock) as client:
        assert await client.get_json(5, "/repos/o/r") == {"ok": True}
        github.refuse_tokens.add(github.minted[-1])  # revoked behind our back
        assert await client.get_json(5, "/repos/o/r") == {"ok": True}
        assert len(github.minted) == 2
        github.refuse_tokens.update(github.minted)
        github.routes[("GET", "/repos/o/r")] = lambda r: httpx.Response(
            401, json={"message": "Bad credentials"}
        )
        with pytest.raises(Unauthorized, match="Bad credentials"):
            await client.get_json(5, "/repos/o/r")
    assert len(github.minted) == 3  # one fresh token per request, never a loop


@pytest.mark.anyio
async def test_find_repository_installation_uses_the_jwt(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def installation(request: httpx.Request) -> httpx.Response:
        assert github._jwt_ok(request)
        return httpx.Response(200, json={"id": 1234, "account": {"login": "o"}})

    github.routes[("GET", "/repos/octo/hello-world/installation")] = installation
    async with _client(github, pem, clock) as client:
        assert await find_repository_installation(client, "octo", "hello-world") == 1234
        with pytest.raises(NotFound):
            await find_repository_installation(client, "octo", "not-installed")
        with pytest.raises(ValueError):
            await find_repository_installation(client, "octo", "../../app")
    assert not any(r.url.path.endswith("/access_tokens") for r in github.requests)


@pytest.mark.anyio
async def test_list_installations_follows_pages(rsa_key: rsa.RSAPrivateKey, pem: str) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def installations(request: httpx.Request) -> httpx.Response:
        assert github._jwt_ok(request)
        page = int(request.url.params.get("page", "1"))
        items = [
            {"id": page * 10 + i, "account": {"login": f"org{page}{i}", "type": "Organization"},
             "repository_selection": "all", "suspended_at": None if i else "2026-01-01T00:00:00Z"}
            for i in range(2)
        ]
        headers = {}
        if page < 3:
            headers["link"] = (
                f'<https://api.github.com/app/installations?per_page=100&page={page + 1}>; '
                'rel="next", <https://api.github.com/app/installations?page=3>; rel="last"'
            )
        return httpx.Response(200, json=items, headers=headers)

    github.routes[("GET", "/app/installations")] = installations
    async with _client(github, pem, clock) as client:
        found = [i async for i in list_installations(client)]
    assert [i.id for i in found] == [10, 11, 20, 21, 30, 31]
    assert found[0].suspended
    assert not found[1].suspended
    assert found[1].account == "org11"
    assert found[1].account_type == "Organization"
    assert github.requests[0].url.params["per_page"] == "100"


@pytest.mark.anyio
async def test_list_installation_repositories_uses_the_installation_token(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def repositories(request: httpx.Request) -> httpx.Response:
        assert github._token_ok(request)
        page = int(request.url.params.get("page", "1"))
        repos = [{"id": page, "full_name": f"o/r{page}", "private": True}]
        headers = {}
        if page == 1:
            headers["link"] = f'<{BASE}/installation/repositories?page=2>; rel="next"'
        return httpx.Response(200, json={"total_count": 2, "repositories": repos}, headers=headers)

    github.routes[("GET", "/installation/repositories")] = repositories
    async with _client(github, pem, clock) as client:
        repos = [r async for r in list_installation_repositories(client, 77)]
    assert [(r.owner, r.name, r.private) for r in repos] == [("o", "r1", True), ("o", "r2", True)]
    assert github.requests[0].url.path == "/app/installations/77/access_tokens"


@pytest.mark.anyio
async def test_an_expired_jwt_answer_is_unauthorized_with_githubs_message(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)
    message = "'Expiration time' claim ('exp') is too far in the future"
    github.routes[("GET", "/app/installations")] = lambda r: httpx.Response(
        401, json={"message": message}
    )
    async with _client(github, pem, clock) as client:
        with pytest.raises(Unauthorized) as err:
            await client.get_json(APP, "/app/installations")
    assert message in str(err.value)
    assert json.dumps(err.value.status) == "401"
