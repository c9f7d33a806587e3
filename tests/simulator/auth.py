"""App authentication as GitHub performs it: JWT checks and installation tokens.

JWT rules (judged on the simulated clock, with GitHub's 401 messages):
- not RS256, unparseable, unknown ``iss`` or a bad signature: "A JSON web token could not
  be decoded" (GitHub's answer when the key does not belong to the App id);
- ``iat`` missing, not an integer, or later than now (plus ``jwt_iat_leeway_seconds``):
  "'Issued at' claim ('iat') must be an Integer representing the time that the assertion
  was issued";
- ``exp`` missing, not numeric, or not in the future: "'Expiration time' claim ('exp') must
  be a numeric value representing the future time at which the assertion expires";
- ``exp`` more than ``jwt_max_lifetime_seconds`` (600) ahead of now: "'Expiration time'
  claim ('exp') is too far in the future".

``iss`` may be the App id (as a string or a number) or its client id.

Installation tokens: ``ghs_<app id>_<header>.<claims>.<signature>`` (about 520 characters,
the format GitHub rolled out in 2026) unless ``stateless_tokens`` is off or the mint
request sends ``X-GitHub-Stateless-S2S-Token: disabled`` (then the classic 40 characters).
Expired, revoked or unknown tokens get 401 "Bad credentials".
"""

from __future__ import annotations

import base64
import json
import secrets
import string
from datetime import datetime
from typing import TYPE_CHECKING, Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .rest import ApiError

if TYPE_CHECKING:
    from .models import App, Token
    from .state import World

DECODE_FAILED = "A JSON web token could not be decoded"
IAT_INVALID = (
    "'Issued at' claim ('iat') must be an Integer representing the time that the assertion "
    "was issued"
)
EXP_INVALID = (
    "'Expiration time' claim ('exp') must be a numeric value representing the future time "
    "at which the assertion expires"
)
EXP_TOO_FAR = "'Expiration time' claim ('exp') is too far in the future"
BAD_CREDENTIALS = "Bad credentials"
REQUIRES_AUTH = "Requires authentication"


def split_authorization(header: str | None) -> tuple[str, str] | None:
    """``("bearer"|"token", credential)`` from an ``Authorization`` header, or None."""
    if not header:
        return None
    scheme, _, credential = header.strip().partition(" ")
    credential = credential.strip()
    if not credential:
        return None
    return scheme.lower(), credential


def _find_app(world: World, issuer: Any) -> App | None:
    for app in world.apps.values():
        if issuer in (app.id, str(app.id), app.client_id):
            return app
    return None


def verify_app_jwt(world: World, header: str | None) -> App:
    """The App a JWT authenticates, or an ``ApiError`` with GitHub's status and message."""
    parts = split_authorization(header)
    if parts is None:
        raise ApiError(401, REQUIRES_AUTH)
    scheme, token = parts
    if scheme != "bearer":
        # GitHub only accepts `Bearer` for JWTs; a `token` scheme is read as a token.
        raise ApiError(401, DECODE_FAILED)
    try:
        if jwt.get_unverified_header(token).get("alg") != "RS256":
            raise ApiError(401, DECODE_FAILED)
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise ApiError(401, DECODE_FAILED) from exc
    app = _find_app(world, claims.get("iss"))
    if app is None or app.public_key_pem is None:
        raise ApiError(401, DECODE_FAILED)
    try:
        jwt.decode(
            token, app.public_key_pem, algorithms=["RS256"],
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False,
                     "verify_aud": False, "verify_iss": False, "require": []},
        )
    except jwt.PyJWTError as exc:
        raise ApiError(401, DECODE_FAILED) from exc
    now = world.clock.timestamp()
    iat, exp = claims.get("iat"), claims.get("exp")
    if not isinstance(iat, int) or isinstance(iat, bool) or (
            iat > now + world.settings.jwt_iat_leeway_seconds):
        raise ApiError(401, IAT_INVALID)
    if not isinstance(exp, int | float) or isinstance(exp, bool) or exp <= now:
        raise ApiError(401, EXP_INVALID)
    if exp > now + world.settings.jwt_max_lifetime_seconds:
        raise ApiError(401, EXP_TOO_FAR)
    return app


def verify_installation_token(world: World, header: str | None) -> Token:
    """The live installation token in ``header``, or 401 "Bad credentials"."""
    parts = split_authorization(header)
    if parts is None:
        raise ApiError(401, REQUIRES_AUTH)
    _, credential = parts
    token = world.tokens.get(credential)
    if token is None or token.revoked or token.expires_at <= world.clock.now():
        raise ApiError(401, BAD_CREDENTIALS)
    return token


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_token_value(app_id: int, installation_id: int, expires_at: datetime, *,
                     stateless: bool) -> str:
    """A fresh installation token string in either of GitHub's two formats."""
    if not stateless:
        alphabet = string.ascii_letters + string.digits
        return "ghs_" + "".join(secrets.choice(alphabet) for _ in range(36))
    header = _b64(json.dumps({"alg": "RS256", "typ": "JWT"}).encode())
    claims = _b64(json.dumps({
        "iid": installation_id, "aid": app_id, "exp": int(expires_at.timestamp()),
        "jti": secrets.token_hex(16),
    }, separators=(",", ":")).encode())
    signature = _b64(secrets.token_bytes(256))
    return f"ghs_{app_id}_{header}.{claims}.{signature}"


def generate_app_key() -> tuple[str, bytes]:
    """A new App key pair: (PKCS#1 private PEM as GitHub hands it out, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem
