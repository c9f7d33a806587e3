"""Webhook deliveries: signature verification and body parsing. Pure: no I/O, no clock.

GitHub signs each delivery with HMAC-SHA256 over the *raw* request body and sends
``X-Hub-Signature-256: sha256=<64 lowercase hex digits>``. The receiver must check that
before parsing anything, with a constant-time comparison. During a secret rotation the
receiver holds several secrets and accepts a delivery signed with any of them.

Two entry points, one rule:

- ``check_signature(body, header, secrets)`` returns ``None`` or raises ``SignatureError``
  whose ``reason`` (``no_secret``, ``missing``, ``unsupported_algorithm``, ``malformed``,
  ``mismatch``) is safe to log: it never contains a secret or the expected digest.
- ``verify_signature(...)`` is the same check as a ``bool``.

The header is matched exactly as GitHub sends it: the ``sha256=`` prefix in lower case
and lower-case hex. The legacy ``sha1=`` header is refused, not downgraded to.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
from collections.abc import Sequence
from typing import Any, Final, Literal
from urllib.parse import parse_qs

import orjson

from service.config.secret import Secret
from service.github.payload import PayloadError

SignatureReason = Literal["no_secret", "missing", "unsupported_algorithm", "malformed", "mismatch"]
SIGNATURE_HEADER = "X-Hub-Signature-256"
_PREFIX = "sha256="
_HEX64 = re.compile(r"[0-9a-f]{64}")


class SignatureError(Exception):
    """A delivery whose signature does not verify. ``reason`` says which way it failed."""

    def __init__(self, reason: SignatureReason, detail: str) -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}")




def _secret_bytes(secret: bytes | str | Secret) -> bytes:
    if isinstance(secret, Secret):
        secret = secret.reveal()
    return secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)


def sign(body: bytes, secret: bytes | str | Secret) -> str:
    """The ``X-Hub-Signature-256`` value GitHub would send for ``body``."""
    key = _secret_bytes(secret)
    if not key:
        raise ValueError("cannot sign with an empty webhook secret")
    return _PREFIX + hmac.new(key, body, hashlib.sha256).hexdigest()


def check_signature(
    body: bytes, header: str | None, secrets: Sequence[bytes | str | Secret]
) -> None:
    """Raise ``SignatureError`` unless ``header`` signs ``body`` under one of ``secrets``.

    Every configured secret is tried (no early exit on a match), so the time taken does
    not reveal which secret matched.
    """
    keys = [key for key in (_secret_bytes(s) for s in secrets) if key]
    if not keys:
        raise SignatureError("no_secret", "no webhook secret is configured")
    if header is None or header == "":
        raise SignatureError("missing", f"no {SIGNATURE_HEADER} header")
    if not header.startswith(_PREFIX):
        algorithm = header.split("=", 1)[0] if "=" in header else "none"
        shown = algorithm if algorithm.isalnum() and len(algorithm) <= 16 else "unknown"
        raise SignatureError("unsupported_algorithm", f"expected sha256=, got {shown}=")
    given = header[len(_PREFIX):]
    if not _HEX64.fullmatch(given):
        raise SignatureError("malformed", "signature is not 64 lower-case hex digits")
    matched = False
    wanted = given.encode("ascii")
    for key in keys:
        # hmac.digest is OpenSSL's one-shot HMAC: no Python HMAC object per delivery.
        expected = hmac.digest(key, body, "sha256").hex().encode("ascii")
        matched |= hmac.compare_digest(expected, wanted)
    if not matched:
        raise SignatureError("mismatch", "signature does not match any configured secret")


def verify_signature(
    body: bytes, header: str | None, secrets: Sequence[bytes | str | Secret]
) -> bool:
    """``check_signature`` as a boolean."""
    try:
        check_signature(body, header, secrets)
    except SignatureError:
        return False
    return True


def _reject_constant(name: str) -> Any:
    raise PayloadError(f"payload contains the non-JSON number {name}")


# orjson reads a webhook payload about three times faster than the standard library, and
# every delivery is parsed. Whatever orjson refuses (a lone surrogate, NaN, 1e400, UTF-16,
# ...) is read again by json, which decides. One difference remains: orjson reads an
# integer outside 64 bits as a float. No id can be that large, and where the rules need an
# id a float is as malformed as an integer too large for the store, so the outcome is the
# same (``malformed_payload``).
_UNREAD: Final = object()


def _load_json(raw: str | bytes, what: str) -> dict[str, Any]:
    value: Any = _UNREAD
    if isinstance(raw, bytes):
        with contextlib.suppress(orjson.JSONDecodeError):
            value = orjson.loads(raw)
    if value is _UNREAD:
        try:
            value = json.loads(raw, parse_constant=_reject_constant)
        except PayloadError:
            raise
        except (ValueError, RecursionError) as exc:
            # UnicodeDecodeError is a ValueError; RecursionError is absurdly deep nesting.
            raise PayloadError(f"{what} is not valid JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise PayloadError(f"{what} is JSON but not an object")
    return value


def media_type(content_type: str | None) -> str | None:
    """``application/json; charset=utf-8`` → ``application/json``."""
    if content_type is None:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def parse_body(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The delivery's payload as a dict. Call only after the signature has verified.

    ``application/json`` (or no content type) is parsed as JSON;
    ``application/x-www-form-urlencoded`` must carry exactly one ``payload`` field
    holding the JSON. Anything else raises ``PayloadError``.
    """
    kind = media_type(content_type)
    if kind in (None, "application/json"):
        return _load_json(body, "body")
    if kind == "application/x-www-form-urlencoded":
        try:
            text = body.decode("utf-8")
            fields = parse_qs(text, keep_blank_values=True, strict_parsing=True, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise PayloadError("form body is not valid url-encoded UTF-8") from None
        payload = fields.get("payload")
        if payload is None or len(payload) != 1:
            raise PayloadError("form body must carry exactly one 'payload' field")
        return _load_json(payload[0], "form field 'payload'")
    raise PayloadError(f"unsupported content type {kind!r}")
