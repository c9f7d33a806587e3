"""What the App-credential tests share: an RSA key made at run time, a fake GitHub that
mints installation tokens for a valid App JWT and answers a few routes, and a client
configured as the App on it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from service.config.connections import GitHubConfig
from service.config.secret import Secret
from service.github.client import GitHubClient
from tests.github.client_kit import FakeClock, FakeSleep

__all__ = ["APP_ID", "LONG_TOKEN", "FakeGitHub", "app_client", "decoded_claims", "pem",
           "rsa_key"]

APP_ID = 4242
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


def decoded_claims(token: str, rsa_key: rsa.RSAPrivateKey) -> dict[str, Any]:
    # Signature checked against the public key; times checked by the tests themselves.
    return jwt.decode(
        token,
        rsa_key.public_key(),
        algorithms=["RS256"],
        options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
    )


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

    def jwt_ok(self, request: httpx.Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme != "Bearer":
            return False
        try:
            claims = decoded_claims(value, self.rsa_key)
        except jwt.PyJWTError:
            return False
        now = int(self.clock().timestamp())
        fresh = claims["iat"] <= now < claims["exp"] < now + 600
        return bool(claims["iss"] == str(APP_ID) and fresh)

    def token_ok(self, request: httpx.Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        return scheme == "Bearer" and value in self.minted and value not in self.refuse_tokens

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        await asyncio.sleep(0)
        path = request.url.path.removeprefix("/api/v3")
        if path.startswith("/app/installations/") and path.endswith("/access_tokens"):
            if request.method != "POST" or not self.jwt_ok(request):
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


def app_client(
    github: FakeGitHub, pem: str, clock: FakeClock, api_url: str = "https://api.github.com"
) -> GitHubClient:
    config = GitHubConfig(
        app_id=APP_ID, private_key=Secret(pem), webhook_secrets=(Secret("w"),), api_url=api_url
    )
    return GitHubClient.from_config(
        config, clock=clock, transport=httpx.MockTransport(github), sleep=FakeSleep(clock)
    )
