"""App authentication: JWT claims and installation tokens, minted and refreshed."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

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
from service.github.errors import GitHubError, Unauthorized
from tests.github.app_kit import (
    APP_ID,
    LONG_TOKEN,
    FakeGitHub,
    app_client,
    decoded_claims,
    pem,
    rsa_key,
)
from tests.github.client_kit import T0, FakeClock

__all__ = ["pem", "rsa_key"]  # fixtures


# ---------------------------------------------------------------- the App JWT


def test_jwt_claims_and_signature(pem: str, rsa_key: rsa.RSAPrivateKey) -> None:
    token = make_app_jwt(APP_ID, pem, T0)
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    claims = decoded_claims(token, rsa_key)
    assert claims == {
        "iat": int(T0.timestamp()) - 60,
        "exp": int(T0.timestamp()) + 9 * 60,
        "iss": str(APP_ID),
    }


def test_jwt_verification_fails_with_another_key(pem: str) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(jwt.InvalidSignatureError):
        decoded_claims(make_app_jwt(APP_ID, pem, T0), other)


@pytest.mark.parametrize("fast_by", [0, 30, 59])
def test_a_fast_clock_keeps_exp_under_githubs_ten_minutes(
    pem: str, rsa_key: rsa.RSAPrivateKey, fast_by: int
) -> None:
    github_now = T0
    host_now = T0 + timedelta(seconds=fast_by)
    claims = decoded_claims(make_app_jwt(APP_ID, pem, host_now), rsa_key)
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
    assert decoded_claims(second, rsa_key)["iat"] == int(clock.now.timestamp()) - 60
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


@pytest.mark.anyio
async def test_client_mints_with_the_jwt_and_uses_the_token(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)

    def pulls(request: httpx.Request) -> httpx.Response:
        if not github.token_ok(request):
            return httpx.Response(401, json={"message": "Bad credentials"})
        return httpx.Response(200, json=[{"number": 1}])

    github.routes[("GET", "/repos/o/r/pulls")] = pulls
    async with app_client(github, pem, clock) as client:
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
    async with app_client(github, pem, clock, "https://ghe.example.com/api/v3/") as client:
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
        if not github.token_ok(request):
            return httpx.Response(401, json={"message": "Bad credentials"})
        return httpx.Response(200, json={"ok": True})

    github.routes[("GET", "/repos/o/r")] = repo
    async with app_client(github, pem, clock) as client:
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
async def test_an_expired_jwt_answer_is_unauthorized_with_githubs_message(
    rsa_key: rsa.RSAPrivateKey, pem: str
) -> None:
    clock = FakeClock()
    github = FakeGitHub(rsa_key, clock)
    message = "'Expiration time' claim ('exp') is too far in the future"
    github.routes[("GET", "/app/installations")] = lambda r: httpx.Response(
        401, json={"message": message}
    )
    async with app_client(github, pem, clock) as client:
        with pytest.raises(Unauthorized) as err:
            await client.get_json(APP, "/app/installations")
    assert message in str(err.value)
    assert json.dumps(err.value.status) == "401"
